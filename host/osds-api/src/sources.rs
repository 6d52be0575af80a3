//! The `source` filter of `/reports`, `/stream` and `/ws`: one channel or a comma-separated list. Channel
//! names are interned, so every rendered report carries its channel as a plain `&'static str` (the cache holds
//! a million of them) and the hub compares without allocating.

use crate::error::{ApiError, ErrorCode};
use crate::params::Params;
use std::sync::{Arc, Mutex, PoisonError};

/// The one `&'static str` of each channel name seen (channels are few: the archived ones and any an operator
/// adds; each is leaked once).
pub fn intern(source: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(name) = names.iter().find(|name| **name == source) {
        return name;
    }
    let name: &'static str = Box::leak(source.to_owned().into_boxed_str());
    names.push(name);
    name
}

/// The channels a consumer asked for. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFilter(Arc<[&'static str]>);

impl SourceFilter {
    /// The `source` parameter, if given: every name must be one of `known` (asked for only then; repeats are
    /// ignored).
    pub fn from_params(
        params: &mut Params,
        known: impl FnOnce() -> Vec<String>,
    ) -> Result<Option<SourceFilter>, ApiError> {
        let Some(text) = params.take("source") else {
            return Ok(None);
        };
        let known = known();
        let mut sources: Vec<&'static str> = Vec::new();
        for name in text.split(',') {
            if !known.iter().any(|k| k == name) {
                return Err(ApiError::bad_request(
                    ErrorCode::InvalidParameter,
                    format!(
                        "`source` must be one of {}, or several of them separated by commas",
                        known.join(", ")
                    ),
                ));
            }
            let name = intern(name);
            if !sources.contains(&name) {
                sources.push(name);
            }
        }
        Ok(Some(SourceFilter(sources.into())))
    }

    pub fn accepts(&self, source: &str) -> bool {
        self.0.contains(&source)
    }

    pub fn sources(&self) -> &[&'static str] {
        &self.0
    }
}

/// Whether `filter` (none: every channel) lets a report of `source` through.
pub fn accepts(filter: Option<&SourceFilter>, source: &str) -> bool {
    filter.is_none_or(|f| f.accepts(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> Result<Option<SourceFilter>, ApiError> {
        let known = ["cea".to_owned(), "sc".to_owned(), "fj".to_owned()];
        let mut params = Params::parse(Some(query))?;
        SourceFilter::from_params(&mut params, || known.to_vec())
    }

    #[test]
    fn a_list_of_known_channels_is_a_filter_and_anything_else_is_refused() {
        let filter = parse("source=sc,cea,sc").unwrap().unwrap();
        assert_eq!(filter.sources(), ["sc", "cea"]);
        assert!(filter.accepts("cea") && !filter.accepts("fj"));
        assert!(parse("after=1").unwrap().is_none());
        for bad in [
            "source=",
            "source=zz",
            "source=sc,zz",
            "source=sc,",
            "source=SC",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(std::ptr::eq(intern("sc"), filter.sources()[0]));
    }
}
