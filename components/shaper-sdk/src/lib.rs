//! Write a hyp report shaper component for `osds`: implement [`Shaper`] and export it with [`export_shaper!`].
//! A shaper turns one detector solution (JSON bytes) into the published report payload (JSON bytes); the host
//! calls it under the same sandbox and limits as the decoders.

/// The bindings of the `osds:hyp/shaper@1.0.0` world, generated here so a shaper crate needs no WIT files.
pub mod bindings {
    wit_bindgen::generate!({
        world: "shaper",
        path: "wit",
        default_bindings_module: "osds_shaper_sdk::bindings",
        pub_export_macro: true,
        export_macro_name: "export_shaper_world",
    });
}

/// A report shaper.
pub trait Shaper {
    /// Stable shaper name, e.g. `hyp-shaper`.
    fn name() -> String;
    /// The shaper's own version (semver).
    fn version() -> String;
    /// Shapes one solution into the report payload; an error refuses the solution with a message.
    fn shape(solution: &[u8]) -> Result<Vec<u8>, String>;
}

/// Exports a type implementing [`Shaper`] as the component's `osds:hyp/shaper` world. Use once per crate.
#[macro_export]
macro_rules! export_shaper {
    ($shaper:ty) => {
        struct OsdsShaperExport;

        impl $crate::bindings::Guest for OsdsShaperExport {
            fn info() -> $crate::bindings::ShaperInfo {
                $crate::bindings::ShaperInfo {
                    name: <$shaper as $crate::Shaper>::name(),
                    version: <$shaper as $crate::Shaper>::version(),
                }
            }

            fn shape(
                solution: ::std::vec::Vec<u8>,
            ) -> ::std::result::Result<::std::vec::Vec<u8>, $crate::bindings::ShapeError> {
                <$shaper as $crate::Shaper>::shape(&solution)
                    .map_err(|message| $crate::bindings::ShapeError { message })
            }
        }

        $crate::bindings::export_shaper_world!(OsdsShaperExport);
    };
}
