//! `cli-docs DIR`, the hidden subcommand of `truecold` and `truecold-proof`: shell
//! completions and man pages generated from the binary's own clap definition, by
//! `clap_complete` and `clap_mangen`, so they cannot drift from `--help`.
//!
//! Under `DIR` it writes `completions/<bin>.bash`, `completions/_<bin>` (zsh),
//! `completions/<bin>.fish`, `man/<bin>.1` and one page per visible subcommand
//! (`man/<bin>-<sub>.1`, nested ones `man/<bin>-<sub>-<subsub>.1`). Hidden subcommands and
//! hidden flags (internal or test-only) are in none of them.
//!
//! A man page is `clap_mangen`'s, with a synopsis that shows each option's value
//! (`[--mode <MODE>]`, where `clap_mangen` writes `[--mode]`), and, in place of the EXTRA
//! section it would make of `--help`'s last paragraph, EXIT STATUS (the one table,
//! [`crate::cli_text::EXITS`]), EXAMPLES ([`crate::cli_text::examples`]: the quick start) and
//! SEE ALSO (the other pages, the docs). The bash completion script is `clap_complete`'s with
//! its state names made to match its case arms for a binary whose name holds a `-`
//! ([`fix_bash_states`], clap-rs/clap#6421: without it `truecold-proof compare --st<TAB>`
//! offers nothing).
//!
//! Every file is rendered in memory first; nothing is written while any of them already
//! exists ([`CliDocsError::Exists`]), and each is then created as a new file
//! ([`fsio::write_new_file`]: `O_CREAT | O_EXCL | O_NOFOLLOW`), so an existing file is never
//! overwritten, even one that appears meanwhile.

use crate::fsio;
use clap::Command;
use clap_complete::Shell;
use std::io;
use std::path::{Path, PathBuf};
use truecold_proto::path_io::PathIoError;

/// Why `cli-docs` wrote nothing, or not everything.
#[derive(Debug, thiserror::Error)]
pub enum CliDocsError {
    #[error(
        "{} already exists; cli-docs writes only new files and never overwrites one (remove \
         it, or choose another DIR)",
        .0.display()
    )]
    Exists(PathBuf),
    #[error("rendering the man page {0}")]
    Render(String, #[source] io::Error),
    #[error(transparent)]
    Io(#[from] PathIoError),
}

/// One generated file: its path relative to `DIR`, and its bytes.
#[derive(Debug, Clone)]
pub struct DocFile {
    pub rel: PathBuf,
    pub bytes: Vec<u8>,
}

/// Renders every file for the binary whose clap definition is `cmd` (named by
/// `cmd.get_name()`), in the order [`write`] writes them: the three completions, then the
/// man pages (the binary's first, then each visible subcommand's, depth first).
pub fn render(cmd: Command) -> Result<Vec<DocFile>, CliDocsError> {
    let bin = cmd.get_name().to_owned();
    // The man pages describe the commands themselves: `help` is no subcommand of its own
    // there, as in `clap_mangen::generate_to`.
    let mut man = cmd.clone().disable_help_subcommand(true);
    man.build();
    let mut cmd = cmd;
    cmd.build();
    let mut files = Vec::new();
    let mut public = public_tree(&cmd);
    for (shell, name) in [
        (Shell::Bash, format!("{bin}.bash")),
        (Shell::Zsh, format!("_{bin}")),
        (Shell::Fish, format!("{bin}.fish")),
    ] {
        let mut bytes = Vec::new();
        clap_complete::generate(shell, &mut public, bin.clone(), &mut bytes);
        if shell == Shell::Bash {
            bytes = fix_bash_states(&bin, &String::from_utf8_lossy(&bytes)).into_bytes();
        }
        files.push(DocFile {
            rel: Path::new("completions").join(name),
            bytes,
        });
    }
    let source = match man.get_version() {
        Some(v) => format!("{bin} {v}"),
        None => bin.clone(),
    };
    man_pages(&man, &source, &bin, &mut files)?;
    Ok(files)
}

/// `clap_complete`'s bash script with every case arm named as its state is (clap-rs/clap#6421):
/// for a binary whose name holds a `-`, the loop that follows the words sets
/// `cmd="truecold__proof__subcmd__compare"` while the arm that completes it reads
/// `truecold__subcmd__proof__subcmd__compare)`, so nothing after a subcommand completes. Each
/// such arm is renamed to the state; a script without them (a fixed `clap_complete`) is
/// returned as it is.
pub fn fix_bash_states(bin: &str, script: &str) -> String {
    if !bin.contains('-') {
        return script.to_string();
    }
    // The state's spelling of the binary, and the arms' (one `-` each).
    let state = bin.replace('-', "__");
    let arm = bin.replace('-', "__subcmd__");
    script
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with(&format!("{arm}__subcmd__")) && t.ends_with(')') {
                l.replacen(&arm, &state, 1)
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if script.ends_with('\n') { "\n" } else { "" }
}

/// Writes [`render`]'s files under `dir` (creating `dir/completions` and `dir/man` as
/// needed) and returns their paths. Refuses, writing nothing, when any of them exists.
pub fn write(cmd: Command, dir: &Path) -> Result<Vec<PathBuf>, CliDocsError> {
    let files = render(cmd)?;
    let targets: Vec<(PathBuf, &[u8])> = files
        .iter()
        .map(|f| (dir.join(&f.rel), f.bytes.as_slice()))
        .collect();
    if let Some((p, _)) = targets.iter().find(|(p, _)| fsio::exists_here(p)) {
        return Err(CliDocsError::Exists(p.clone()));
    }
    for sub in ["completions", "man"] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).map_err(PathIoError::at("create the directory", &d))?;
    }
    for (p, bytes) in &targets {
        fsio::write_new_file(p, bytes).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                CliDocsError::Exists(p.clone())
            } else {
                CliDocsError::Io(e)
            }
        })?;
    }
    Ok(targets.into_iter().map(|(p, _)| p).collect())
}

/// `cmd`'s page and, depth first, each visible subcommand's (`cmd` built, so every
/// subcommand's display name is `<bin>-<sub>…`, the page's name, and its bin name the command
/// as typed, `<bin> <sub>…`).
fn man_pages(
    cmd: &Command,
    source: &str,
    bin: &str,
    files: &mut Vec<DocFile>,
) -> Result<(), CliDocsError> {
    let typed = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_owned();
    let page_cmd = cmd
        .clone()
        .after_help(None::<&str>)
        .after_long_help(None::<&str>)
        .override_usage(synopsis(cmd, &typed));
    let page = clap_mangen::Man::new(page_cmd).source(source.to_owned());
    let name = page.get_filename();
    let mut bytes = Vec::new();
    page.render(&mut bytes)
        .map_err(|e| CliDocsError::Render(name.clone(), e))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let added = extra_sections(cmd, &typed, bin);
    // Before VERSION (the page's last section), else at the end.
    let text = match text.find("\n.SH VERSION\n") {
        Some(i) => format!("{}\n{}{}", &text[..i], added, &text[i + 1..]),
        None => format!("{text}{added}"),
    };
    files.push(DocFile {
        rel: Path::new("man").join(name),
        bytes: text.into_bytes(),
    });
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, source, bin, files)?;
    }
    Ok(())
}

/// The man page's synopsis of `cmd` (typed as `typed`): every visible option with its value
/// (`[-n|--count <COUNT>]`), the positionals, the subcommand; one line.
pub fn synopsis(cmd: &Command, typed: &str) -> String {
    let mut words = vec![typed.to_owned()];
    for a in cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
    {
        let flag = match (a.get_short(), a.get_long()) {
            (Some(s), Some(l)) => format!("-{s}|--{l}"),
            (Some(s), None) => format!("-{s}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => continue,
        };
        let value = if a.get_action().takes_values() {
            let names: Vec<String> = a
                .get_value_names()
                .map(|v| v.iter().map(|n| format!("<{n}>")).collect())
                .unwrap_or_else(|| vec![format!("<{}>", a.get_id().as_str().to_uppercase())]);
            format!(" {}", names.join(" "))
        } else {
            String::new()
        };
        if a.is_required_set() {
            words.push(format!("{flag}{value}"));
        } else {
            words.push(format!("[{flag}{value}]"));
        }
    }
    for a in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let n = a
            .get_value_names()
            .map(|v| v.join(" "))
            .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
        words.push(if a.is_required_set() {
            format!("<{n}>")
        } else {
            format!("[{n}]")
        });
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        words.push("<COMMAND>".to_owned());
    }
    words.join(" ")
}

/// roff text: `\` and `-` escaped, a line that would start with `.` or `'` guarded.
fn roff_escape(s: &str) -> String {
    let e = s.replace('\\', "\\e").replace('-', "\\-");
    if e.starts_with('.') || e.starts_with('\'') {
        format!("\\&{e}")
    } else {
        e
    }
}

/// EXIT STATUS, EXAMPLES and SEE ALSO of the page of `typed` (`truecold bisect step`), in a
/// binary named `bin`.
fn extra_sections(cmd: &Command, typed: &str, bin: &str) -> String {
    use crate::cli_text::{examples, exits, EXITS, EXIT_USAGE, SEE_ALSO_DOCS};
    let mut s = String::new();
    // What `--help` says after the options besides the exit statuses (compare's rule).
    if let Some(after) = cmd.get_after_long_help().map(|h| h.to_string()) {
        let rule = after.split("Exit status:").next().unwrap_or("").trim();
        if !rule.is_empty() {
            s += ".SH DETAILS\n";
            for l in rule.lines() {
                if l.trim().is_empty() {
                    s += ".PP\n";
                } else {
                    s += &format!("{}\n.br\n", roff_escape(l));
                }
            }
        }
    }
    s += ".SH \"EXIT STATUS\"\n";
    match exits(typed) {
        Some(e) => {
            for c in e.codes {
                s += &format!(".TP\n\\fB{}\\fR\n{}\n", c.code, roff_escape(c.detail));
            }
        }
        None => {
            for e in EXITS.iter().filter(|e| {
                e.command
                    .strip_prefix(typed)
                    .is_some_and(|r| r.starts_with(' '))
            }) {
                let codes: Vec<String> = e
                    .codes
                    .iter()
                    .map(|c| format!("{} {}", c.code, c.word))
                    .collect();
                s += &format!(
                    ".TP\n\\fB{}\\fR\n{}\n",
                    roff_escape(e.command),
                    roff_escape(&codes.join(", "))
                );
            }
            s += &format!(
                ".PP\n{}\n",
                roff_escape(&format!(
                    "Any usage error exits {EXIT_USAGE}; --help and --version exit 0. Each \
                     subcommand's page explains its codes."
                ))
            );
        }
    }
    let ex = examples(typed);
    if !ex.is_empty() {
        s += ".SH EXAMPLES\n";
        for (what, line) in ex {
            s += &format!(
                ".PP\n{}\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE\n",
                roff_escape(what),
                roff_escape(line)
            );
        }
    }
    // The pages of this binary (but this one), its parent's, the other binary's.
    let own = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
    let other = if bin == "truecold" {
        "truecold-proof"
    } else {
        "truecold"
    };
    let mut pages: Vec<String> = vec![bin.to_owned()];
    pages.extend(EXITS.iter().filter_map(|e| {
        e.command
            .strip_prefix(bin)
            .filter(|r| r.starts_with(' '))
            .map(|r| format!("{bin}{}", r.replace(' ', "-")))
    }));
    pages.push(other.to_owned());
    pages.retain(|p| *p != own);
    pages.dedup();
    s += ".SH \"SEE ALSO\"\n";
    let refs: Vec<String> = pages
        .iter()
        .map(|p| format!("\\fB{}\\fR(1)", roff_escape(p)))
        .collect();
    s += &format!("{}\n.PP\n{}\n", refs.join(", "), roff_escape(SEE_ALSO_DOCS));
    s
}

/// `cmd` (built) without its hidden subcommands and hidden arguments, at every level:
/// `clap_complete` would offer them otherwise. The copy keeps what completions read (names,
/// about texts, the arguments with their values and help, the version); the built
/// `--help`/`--version` flags and the `help` subcommand are copied, not generated again.
fn public_tree(cmd: &Command) -> Command {
    let mut c = Command::new(cmd.get_name().to_owned())
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true)
        .args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(public_tree),
        );
    if let Some(a) = cmd.get_about() {
        c = c.about(a.clone());
    }
    if let Some(a) = cmd.get_long_about() {
        c = c.long_about(a.clone());
    }
    if let Some(v) = cmd.get_version() {
        c = c.version(v.to_owned());
    }
    c
}

/// A usage error's message for a JSON `error` object: clap's text without its usage and
/// tips, on one line (`unexpected argument '--x' found`, `the following required arguments
/// were not provided: <B>`). One definition for `truecold` and `truecold-proof`.
pub fn usage_message(e: &clap::Error) -> String {
    e.render()
        .to_string()
        .split("\n\n")
        .next()
        .unwrap_or("usage error")
        .trim_start_matches("error: ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn toy() -> Command {
        Command::new("toy")
            .version("1.2.3")
            .about("A toy")
            .subcommand(
                Command::new("open")
                    .about("Open it")
                    .arg(Arg::new("wide").long("wide").action(ArgAction::SetTrue))
                    .arg(
                        Arg::new("secret-flag")
                            .long("secret-flag")
                            .hide(true)
                            .action(ArgAction::SetTrue),
                    ),
            )
            .subcommand(Command::new("internal-step").hide(true))
            .subcommand(
                Command::new("nest")
                    .about("Nested")
                    .subcommand(Command::new("inner").about("Inner")),
            )
    }

    #[test]
    fn every_file_is_named_and_hidden_things_are_left_out() {
        let files = render(toy()).unwrap();
        let names: Vec<String> = files.iter().map(|f| f.rel.display().to_string()).collect();
        assert_eq!(
            names,
            [
                "completions/toy.bash",
                "completions/_toy",
                "completions/toy.fish",
                "man/toy.1",
                "man/toy-open.1",
                "man/toy-nest.1",
                "man/toy-nest-inner.1",
            ]
        );
        for f in &files {
            let text = String::from_utf8(f.bytes.clone()).unwrap();
            assert!(
                !text.contains("internal-step"),
                "{}:\n{text}",
                f.rel.display()
            );
            assert!(
                !text.contains("secret-flag"),
                "{}:\n{text}",
                f.rel.display()
            );
        }
        let bash = String::from_utf8(files[0].bytes.clone()).unwrap();
        for w in ["open", "nest", "inner", "--wide", "--version"] {
            assert!(bash.contains(w), "{w} not in:\n{bash}");
        }
        let page = String::from_utf8(files[4].bytes.clone()).unwrap();
        assert!(page.contains(".TH toy-open 1  \"toy 1.2.3\""), "{page}");
    }

    /// clap_complete's bash script for a binary whose name holds a `-` names its states one
    /// way and its case arms another (clap-rs/clap#6421); [`fix_bash_states`] renames the
    /// arms. When this test finds the raw script already agreeing, upstream has fixed it and
    /// the workaround can go.
    #[test]
    fn the_bash_script_of_a_hyphenated_binary_completes_after_a_subcommand() {
        let mut raw = Vec::new();
        let mut cmd = Command::new("my-tool").subcommand(
            Command::new("open").arg(Arg::new("wide").long("wide").action(ArgAction::SetTrue)),
        );
        clap_complete::generate(Shell::Bash, &mut cmd, "my-tool", &mut raw);
        let raw = String::from_utf8(raw).unwrap();
        assert!(
            raw.contains("cmd=\"my__tool__subcmd__open\"")
                && raw.contains("my__subcmd__tool__subcmd__open)"),
            "clap-rs/clap#6421 is fixed upstream: fix_bash_states is no longer needed\n{raw}"
        );
        let fixed = fix_bash_states("my-tool", &raw);
        assert!(fixed.contains("        my__tool__subcmd__open)"), "{fixed}");
        assert!(!fixed.contains("my__subcmd__tool"), "{fixed}");
        assert_eq!(fix_bash_states("tool", &raw), raw);
        // In bash: `my-tool open --w<TAB>` offers `--wide` only with the fix.
        let t = tempfile::tempdir().unwrap();
        let complete = |script: &str| {
            let p = t.path().join("c.bash");
            std::fs::write(&p, script).unwrap();
            let o = std::process::Command::new("bash")
                .args(["--norc", "--noprofile", "-c"])
                .arg(format!(
                    "source '{}'; COMP_WORDS=(my-tool open --w); COMP_CWORD=2; \
                     _my__tool my-tool --w open; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                    p.display()
                ))
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        assert_eq!(complete(&fixed), "--wide");
        assert_ne!(complete(&raw), "--wide");
    }

    #[test]
    fn a_second_run_refuses_and_overwrites_nothing() {
        let t = tempfile::tempdir().unwrap();
        let written = write(toy(), t.path()).unwrap();
        assert_eq!(written.len(), 7);
        let before: Vec<Vec<u8>> = written.iter().map(|p| std::fs::read(p).unwrap()).collect();
        std::fs::write(&written[3], b"mine").unwrap();
        let e = write(toy(), t.path()).unwrap_err();
        assert!(
            matches!(&e, CliDocsError::Exists(p) if *p == written[0]),
            "{e:?}"
        );
        assert_eq!(std::fs::read(&written[3]).unwrap(), b"mine");
        for (p, b) in written
            .iter()
            .zip(&before)
            .filter(|(p, _)| **p != written[3])
        {
            assert_eq!(&std::fs::read(p).unwrap(), b, "{}", p.display());
        }
    }
}
