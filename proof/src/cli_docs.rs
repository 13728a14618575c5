//! `cli-docs DIR`, the hidden subcommand of `truecold` and `truecold-proof`: shell
//! completions and man pages generated from the binary's own clap definition, by
//! `clap_complete` and `clap_mangen`, so they cannot drift from `--help`.
//!
//! Under `DIR` it writes `completions/<bin>.bash`, `completions/_<bin>` (zsh),
//! `completions/<bin>.fish`, `man/<bin>.1` and one page per visible subcommand
//! (`man/<bin>-<sub>.1`, nested ones `man/<bin>-<sub>-<subsub>.1`). Hidden subcommands and
//! hidden flags (internal or test-only) are in none of them.
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
        files.push(DocFile {
            rel: Path::new("completions").join(name),
            bytes,
        });
    }
    let source = match man.get_version() {
        Some(v) => format!("{bin} {v}"),
        None => bin.clone(),
    };
    man_pages(&man, &source, &mut files)?;
    Ok(files)
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
/// subcommand's display name is `<bin>-<sub>…`, the page's name).
fn man_pages(cmd: &Command, source: &str, files: &mut Vec<DocFile>) -> Result<(), CliDocsError> {
    let page = clap_mangen::Man::new(cmd.clone()).source(source.to_owned());
    let name = page.get_filename();
    let mut bytes = Vec::new();
    page.render(&mut bytes)
        .map_err(|e| CliDocsError::Render(name.clone(), e))?;
    files.push(DocFile {
        rel: Path::new("man").join(name),
        bytes,
    });
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, source, files)?;
    }
    Ok(())
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
