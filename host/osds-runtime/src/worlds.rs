//! The WIT worlds this host runs components of, with their versions (`wit/<package>/v<version>/`), and the rule
//! for which component versions it accepts: a component built against the same major version, at or below the
//! host's. A component built for another one is refused with a sentence naming both, before anything else is
//! tried.

use anyhow::bail;
use wasmtime::Engine;
use wasmtime::component::Component;

/// A world the host runs components of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct World {
    /// `osds:eew`.
    pub package: &'static str,
    /// `decoder`.
    pub name: &'static str,
    /// `1.0.0`: the version the host was built with.
    pub version: &'static str,
}

/// Channel decoders (`wit/eew`).
pub const DECODER: World = World {
    package: "osds:eew",
    name: "decoder",
    version: "1.0.0",
};

/// The self-sensing report shaper (`wit/hyp`).
pub const SHAPER: World = World {
    package: "osds:hyp",
    name: "shaper",
    version: "1.0.0",
};

/// The reference decoder of the official agency's frames (`wit/reference`).
pub const REFERENCE: World = World {
    package: "osds:reference",
    name: "reference",
    version: "1.0.0",
};

/// Every world, as `/status` and `osds components list` show them.
pub const ALL: [World; 3] = [DECODER, SHAPER, REFERENCE];

impl World {
    /// `osds:eew/decoder@1.0.0`.
    pub fn id(&self) -> String {
        format!("{}/{}@{}", self.package, self.name, self.version)
    }

    /// What it accepts, in words: `osds:eew@1.x up to 1.0.0`.
    pub fn accepts(&self) -> String {
        let major = self.version.split('.').next().unwrap_or("0");
        format!("{}@{major}.x up to {}", self.package, self.version)
    }

    /// Refuses a component whose imports or exports name this world's package at a version the host does not
    /// accept (another major version, or a newer one than the host's).
    pub fn check(&self, engine: &Engine, component: &Component) -> anyhow::Result<()> {
        let ty = component.component_type();
        let names: Vec<String> = ty
            .imports(engine)
            .map(|(name, _)| name.to_owned())
            .chain(ty.exports(engine).map(|(name, _)| name.to_owned()))
            .collect();
        for name in names {
            let Some(version) = name
                .strip_prefix(self.package)
                .and_then(|rest| rest.strip_prefix('/'))
                .and_then(|rest| rest.split_once('@'))
                .map(|(_, version)| version)
            else {
                continue;
            };
            if !compatible(self.version, version) {
                bail!(
                    "the component was built for {}@{version} (it uses `{name}`); this host accepts {}",
                    self.package,
                    self.accepts()
                );
            }
        }
        Ok(())
    }
}

/// `version` (of a component) is the host's major version and not newer than `host`.
fn compatible(host: &str, version: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut parts = v.split(['.', '-', '+']).map(str::parse::<u64>);
        Some((
            parts.next()?.ok()?,
            parts.next()?.ok()?,
            parts.next()?.ok()?,
        ))
    };
    match (parse(host), parse(version)) {
        (Some(host), Some(version)) => host.0 == version.0 && version <= host,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_of_the_same_major_version_up_to_the_hosts_is_accepted() {
        assert!(compatible("1.0.0", "1.0.0"));
        assert!(compatible("1.2.0", "1.1.5"));
        assert!(!compatible("1.0.0", "1.1.0"), "newer than the host");
        assert!(!compatible("1.0.0", "2.0.0"));
        assert!(!compatible("2.0.0", "1.0.0"));
        assert!(!compatible("1.0.0", "one"));
        assert_eq!(DECODER.id(), "osds:eew/decoder@1.0.0");
        assert_eq!(DECODER.accepts(), "osds:eew@1.x up to 1.0.0");
    }

    /// A component that uses `types` of `package` at `version` and exports nothing.
    fn component_using(package: &str, version: &str) -> Vec<u8> {
        use wasm_encoder::{
            Component, ComponentImportSection, ComponentTypeRef, ComponentTypeSection, InstanceType,
        };
        let mut component = Component::new();
        let mut types = ComponentTypeSection::new();
        types.instance(&InstanceType::new());
        component.section(&types);
        let mut imports = ComponentImportSection::new();
        imports.import(
            format!("{package}/types@{version}").as_str(),
            ComponentTypeRef::Instance(0),
        );
        component.section(&imports);
        component.finish()
    }

    /// A decoder built for another major version (or a newer one) is refused before anything else, saying which
    /// versions the host accepts; one of an accepted version goes on to the world's type check.
    #[test]
    fn a_component_of_another_version_is_refused_naming_what_is_accepted() {
        let runtime = crate::Runtime::new(crate::Limits::default()).unwrap();
        for version in ["2.0.0", "1.1.0"] {
            let wasm = component_using("osds:eew", version);
            let error = crate::DecoderComponent::load(&runtime, &wasm)
                .err()
                .expect("refused")
                .to_string();
            assert_eq!(
                error,
                format!(
                    "the component was built for osds:eew@{version} (it uses `osds:eew/types@{version}`); \
                     this host accepts osds:eew@1.x up to 1.0.0"
                )
            );
        }
        let wasm = component_using("osds:eew", "1.0.0");
        let error = format!(
            "{:#}",
            crate::DecoderComponent::load(&runtime, &wasm)
                .err()
                .expect("not a decoder")
        );
        assert!(
            error.starts_with("not an osds:eew/decoder@1.0.0 component"),
            "{error}"
        );
        // Another package's version is not this world's business.
        let wasm = component_using("osds:hyp", "2.0.0");
        let error = format!(
            "{:#}",
            crate::DecoderComponent::load(&runtime, &wasm)
                .err()
                .unwrap()
        );
        assert!(
            error.starts_with("not an osds:eew/decoder@1.0.0 component"),
            "{error}"
        );
    }

    /// The worlds named here are the WIT files shipped: each `package` line is the world's package and version.
    #[test]
    fn the_worlds_are_the_shipped_wit() {
        let wit = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit");
        for world in ALL {
            let folder = world.package.trim_start_matches("osds:");
            let dir = std::path::Path::new(wit)
                .join(folder)
                .join(format!("v{}", world.version));
            let text: String = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
                .collect();
            assert!(
                text.contains(&format!("package {}@{};", world.package, world.version)),
                "{}",
                dir.display()
            );
            assert!(
                text.contains(&format!("world {} {{", world.name)),
                "{}",
                dir.display()
            );
        }
    }
}
