//! A second build of the sc decoder: the same rules under another name, so its `.wasm` differs.
wolfx_core::export_decoder!(wolfx_core::SC, "wolfx-sc-v2");
