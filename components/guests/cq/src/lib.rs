//! The `cq` channel decoder component: all logic lives in `wolfx-core`.
wolfx_core::export_decoder!(wolfx_core::CQ, "wolfx-cq");
