//! The operator's plain CSV tables (stations, travel times): a header naming the columns in any order, then
//! rows of comma-separated cells; blank lines are skipped. No quoting: the tables have none.

use anyhow::Context;

/// A parsed table: the column positions by name and the rows' trimmed cells with their line numbers.
pub struct Csv<'a> {
    what: &'static str,
    names: Vec<&'a str>,
    pub rows: Vec<(usize, Vec<&'a str>)>,
}

impl<'a> Csv<'a> {
    /// Splits `text`; `what` names the table in errors ("the station table").
    pub fn parse(text: &'a str, what: &'static str) -> anyhow::Result<Csv<'a>> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, header) = lines.next().with_context(|| format!("{what} is empty"))?;
        let cells = |line: &'a str| line.split(',').map(str::trim).collect::<Vec<_>>();
        Ok(Csv {
            what,
            names: cells(header),
            rows: lines.map(|(n, line)| (n + 1, cells(line))).collect(),
        })
    }

    /// The positions of required columns, in the order asked for.
    pub fn columns(&self, names: &[&str]) -> anyhow::Result<Vec<usize>> {
        names
            .iter()
            .map(|name| {
                self.names
                    .iter()
                    .position(|n| n == name)
                    .with_context(|| format!("{} has no `{name}` column", self.what))
            })
            .collect()
    }
}

/// A finite number in a cell, or an error naming the column and the text.
pub fn number(cells: &[&str], at: usize, column: &str) -> anyhow::Result<f64> {
    let text = cells.get(at).copied().unwrap_or("");
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .with_context(|| format!("`{column}` is not a number: {text:?}"))
}
