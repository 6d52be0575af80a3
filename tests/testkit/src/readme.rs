//! The command lines the documentation shows (the README and every page of `docs/`), as words, so that each
//! program's own tests can check that it takes the lines that name it (`osds`, `cargo run -p fake-relay`,
//! `bench/run.sh`, ...).

use std::path::PathBuf;

/// The repository's documentation pages: the README, then every page of `docs/` (by name).
pub fn documentation_pages() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap_or_else(|e| panic!("read docs/: {e}"))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut pages = vec![root.join("README.md")];
    pages.extend(docs);
    pages
}

/// The repository's documentation ([`documentation_pages`]), one page after another.
pub fn documentation() -> String {
    documentation_pages()
        .iter()
        .map(|path| {
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The inline code spans of `markdown`, outside its fenced blocks (which a generated help text also is).
pub fn code_spans(markdown: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Every command line of the ```sh blocks of `markdown`, split into words as a shell would (quotes removed),
/// without its comment or a trailing `&`. Optional parts written `[--flag value]` are kept, brackets removed,
/// so the line is checked with them.
pub fn shell_commands(markdown: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut in_shell = false;
    for line in markdown.lines() {
        if let Some(fence) = line.strip_prefix("```") {
            in_shell = !in_shell && fence.trim() == "sh";
            continue;
        }
        if !in_shell {
            continue;
        }
        let mut words = words(line);
        if words.last().is_some_and(|w| w == "&") {
            words.pop();
        }
        if !words.is_empty() {
            commands.push(words);
        }
    }
    commands
}

/// The commands of [`shell_commands`] that start with `program`, without it.
pub fn invocations(markdown: &str, program: &[&str]) -> Vec<Vec<String>> {
    shell_commands(markdown)
        .into_iter()
        .filter(|words| words.len() >= program.len() && words[..program.len()] == *program)
        .map(|words| words[program.len()..].to_vec())
        .collect()
}

/// A line's words up to an unquoted `#` that starts a word; quotes group and are removed, brackets of optional
/// parts are dropped.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    in_word = true;
                }
                '#' if !in_word => break,
                '[' | ']' => {}
                c if c.is_whitespace() => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                c => {
                    word.push(c);
                    in_word = true;
                }
            },
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_split_as_a_shell_would_without_comments_or_brackets() {
        let markdown = "text\n```sh\nosds hyp hide 'hyp:1:2'   # withdraw\nosds serve [--a b] &\n\n# only a comment\n```\n```toml\nosds = 1\n```\n";
        assert_eq!(
            shell_commands(markdown),
            [
                vec!["osds", "hyp", "hide", "hyp:1:2"],
                vec!["osds", "serve", "--a", "b"]
            ]
        );
        assert_eq!(
            invocations(markdown, &["osds", "serve"]),
            [vec!["--a", "b"]]
        );
    }

    #[test]
    fn the_documentation_has_commands() {
        assert!(invocations(&documentation(), &["osds"]).len() > 10);
    }
}
