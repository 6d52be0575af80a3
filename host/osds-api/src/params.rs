//! Strict query-string parsing: every parameter is checked against its bound, and an unknown or repeated
//! parameter is a 400, so a typo never silently returns unfiltered data.

use crate::error::{ApiError, ErrorCode};
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use std::ops::RangeInclusive;

/// The largest integer a JSON consumer can hold exactly (2^53 − 1): the spec's cursor bound.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    pub fn parse(raw: Option<&str>) -> Result<Params, ApiError> {
        let pairs: Vec<(String, String)> = raw
            .unwrap_or_default()
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                let key = decoded(key).map_err(|_| {
                    ApiError::bad_request(
                        ErrorCode::InvalidParameter,
                        "a parameter's name is not UTF-8 once percent-decoded",
                    )
                })?;
                let value = decoded(value).map_err(|_| {
                    ApiError::bad_request(
                        ErrorCode::InvalidParameter,
                        format!("parameter `{key}` is not UTF-8 once percent-decoded"),
                    )
                })?;
                Ok((key, value))
            })
            .collect::<Result<_, ApiError>>()?;
        for (i, (key, _)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(k, _)| k == key) {
                return Err(ApiError::bad_request(
                    ErrorCode::RepeatedParameter,
                    format!("parameter `{key}` is given more than once"),
                ));
            }
        }
        Ok(Params { pairs })
    }

    /// Removes and returns the raw value of `name`.
    pub fn take(&mut self, name: &str) -> Option<String> {
        let index = self.pairs.iter().position(|(k, _)| k == name)?;
        Some(self.pairs.remove(index).1)
    }

    pub fn int(&mut self, name: &str, range: RangeInclusive<i64>) -> Result<Option<i64>, ApiError> {
        let Some(text) = self.take(name) else {
            return Ok(None);
        };
        parse_int(name, &text, range).map(Some)
    }

    pub fn number(
        &mut self,
        name: &str,
        range: RangeInclusive<f64>,
    ) -> Result<Option<f64>, ApiError> {
        let Some(text) = self.take(name) else {
            return Ok(None);
        };
        match text.parse::<f64>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            Ok(n) if !n.is_nan() => Err(out_of_range(
                name,
                &format!("{} to {}", range.start(), range.end()),
            )),
            _ => Err(ApiError::bad_request(
                ErrorCode::InvalidParameter,
                format!("parameter `{name}` must be a number"),
            )),
        }
    }

    pub fn text(&mut self, name: &str, max_chars: usize) -> Result<Option<String>, ApiError> {
        let Some(text) = self.take(name) else {
            return Ok(None);
        };
        if text.chars().count() > max_chars {
            return Err(ApiError::bad_request(
                ErrorCode::ParameterTooLong,
                format!("parameter `{name}` is longer than {max_chars} characters"),
            ));
        }
        Ok(Some(text))
    }

    /// Fails on any parameter not taken.
    pub fn finish(self) -> Result<(), ApiError> {
        match self.pairs.first() {
            None => Ok(()),
            Some((key, _)) => Err(ApiError::bad_request(
                ErrorCode::UnknownParameter,
                format!("unknown parameter `{key}`"),
            )),
        }
    }
}

/// The one path segment of a route, as text, with the same JSON 400 as [`PathTexts`].
pub struct PathText(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathText {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let PathTexts(mut texts) = PathTexts::from_request_parts(parts, state).await?;
        match texts.pop() {
            Some(text) if texts.is_empty() => Ok(PathText(text)),
            _ => Err(ApiError::bad_request(
                ErrorCode::InvalidPath,
                "expected one path parameter",
            )),
        }
    }
}

/// Every path parameter of a route, as text (`/hyp/events/{id}/reports/{number}`). A segment that does not
/// percent-decode to UTF-8 is a 400 with the JSON error body (axum's own rejection would be plain text).
pub struct PathTexts(pub Vec<String>);

impl<S: Send + Sync> FromRequestParts<S> for PathTexts {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<Vec<String>>::from_request_parts(parts, state).await {
            Ok(Path(texts)) => Ok(PathTexts(texts)),
            Err(rejection) => Err(ApiError::bad_request(
                ErrorCode::InvalidPath,
                format!("the path cannot be read: {rejection}"),
            )),
        }
    }
}

/// Parses a decimal integer (digits only, optional leading minus) within `range`.
/// One name or value of a query as a form encodes it (`+` a space, `%XX` a byte), refused unless the bytes are
/// UTF-8: decoded lossily, `%FF` would quietly search for U+FFFD instead.
fn decoded(text: &str) -> Result<String, std::string::FromUtf8Error> {
    let spaced = text.replace('+', " ");
    String::from_utf8(percent_encoding::percent_decode_str(&spaced).collect())
}

pub fn parse_int(name: &str, text: &str, range: RangeInclusive<i64>) -> Result<i64, ApiError> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidParameter,
            format!("`{name}` must be an integer"),
        ));
    }
    match text.parse::<i64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(out_of_range(
            name,
            &format!("{} to {}", range.start(), range.end()),
        )),
    }
}

fn out_of_range(name: &str, range: &str) -> ApiError {
    ApiError::bad_request(
        ErrorCode::OutOfRange,
        format!("`{name}` must be in the range {range}"),
    )
}

/// For an endpoint that takes no query parameters: any one is a 400.
pub fn no_params(query: Option<String>) -> Result<(), ApiError> {
    Params::parse(query.as_deref())?.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_form_decoded_and_refused_unless_utf8() {
        let mut p = Params::parse(Some("q=a+b%20c%E5%9B%9B&&empty=&flag")).unwrap();
        assert_eq!(p.take("q").as_deref(), Some("a b c四"));
        assert_eq!(p.take("empty").as_deref(), Some(""));
        assert_eq!(p.take("flag").as_deref(), Some(""));
        for (raw, says) in [
            ("q=%FF", "`q` is not UTF-8"),
            ("q=%E5%9B", "`q` is not UTF-8"),
            ("%C0=1", "name is not UTF-8"),
        ] {
            let error = Params::parse(Some(raw)).map(|_| ()).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidParameter, "{raw}");
            assert!(error.message.contains(says), "{raw}: {}", error.message);
        }
    }

    #[test]
    fn bounds_types_unknown_and_repeated_parameters_are_refused() {
        let mut p = Params::parse(Some("limit=1000&after=9007199254740991")).unwrap();
        assert_eq!(p.int("limit", 1..=1000).unwrap(), Some(1000));
        assert_eq!(
            p.int("after", 0..=MAX_SAFE_INTEGER).unwrap(),
            Some(MAX_SAFE_INTEGER)
        );
        assert!(p.finish().is_ok());
        assert_eq!(
            Params::parse(Some("limit=0"))
                .unwrap()
                .int("limit", 1..=1000)
                .unwrap_err()
                .code,
            ErrorCode::OutOfRange
        );
        assert_eq!(
            Params::parse(Some("limit=1.5"))
                .unwrap()
                .int("limit", 1..=1000)
                .unwrap_err()
                .code,
            ErrorCode::InvalidParameter
        );
        assert_eq!(
            Params::parse(Some("limit=+5"))
                .unwrap()
                .int("limit", 1..=1000)
                .unwrap_err()
                .code,
            ErrorCode::InvalidParameter
        );
        assert_eq!(
            Params::parse(Some("after=9007199254740992"))
                .unwrap()
                .int("after", 0..=MAX_SAFE_INTEGER)
                .unwrap_err()
                .code,
            ErrorCode::OutOfRange
        );
        assert_eq!(
            Params::parse(Some("a=1&a=2")).err().unwrap().code,
            ErrorCode::RepeatedParameter
        );
        assert_eq!(
            Params::parse(Some("limt=5"))
                .unwrap()
                .finish()
                .unwrap_err()
                .code,
            ErrorCode::UnknownParameter
        );
        let long = "字".repeat(101);
        assert_eq!(
            Params::parse(Some(&format!("q={long}")))
                .unwrap()
                .text("q", 100)
                .unwrap_err()
                .code,
            ErrorCode::ParameterTooLong
        );
        assert!(
            Params::parse(Some(&format!("q={}", "字".repeat(100))))
                .unwrap()
                .text("q", 100)
                .is_ok()
        );
    }
}
