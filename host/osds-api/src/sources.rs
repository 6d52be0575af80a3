//! The `source` filter of `/reports`, `/stream` and `/ws`: one channel or a comma-separated list. A rendered
//! report carries its channel as a shared name (`Arc<str>`, one per channel per batch read), which the filter
//! compares without allocating.

use crate::error::{ApiError, ErrorCode};
use crate::params::Params;
use std::sync::Arc;

/// The channels a consumer asked for. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFilter(Arc<[String]>);

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
        let mut sources: Vec<String> = Vec::new();
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
            if !sources.iter().any(|s| s == name) {
                sources.push(name.to_owned());
            }
        }
        Ok(Some(SourceFilter(sources.into())))
    }

    pub fn accepts(&self, source: &str) -> bool {
        self.0.iter().any(|s| s == source)
    }

    pub fn sources(&self) -> &[String] {
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
    }
}
