//! The documentation's examples, run for real: every fenced code block of `docs/*.md` and
//! `README.md` that an HTML comment `<!-- runnable -->` (with options: `<!-- runnable: OPT ...
//! -->`) marks, run with the foster under test first on `PATH`, in a temporary directory of the
//! document's own (the blocks of one document share it, in their order), each block bounded to
//! 60 seconds and its process group killed after it. The convention is in docs/architecture.md
//! ("Runnable examples"):
//!
//! - a block with `$ COMMAND` lines is a transcript: the commands run in one `sh`, in order, and
//!   what each prints (standard output and error together) must be the lines below it;
//! - any other block is a script, run by `sh`: its exit status must be 0, and each `echo "exit
//!   $?"` line that ends with a comment `# exit N` must print `exit N`;
//! - options: `exit=N` (the script's status, or every transcript command's, is N),
//!   `any-numbers` (every run of digits compares equal to any other: pids, times, sizes),
//!   `any-state` (a process's state letter compares equal to any other),
//!   `file=NAME` (the block is not run: its text is written to NAME for the blocks after it),
//!   `root` (skipped, saying so, when not root), `needs=TOOL,...` (skipped, saying so, when a
//!   program it runs besides foster and the base system is not installed).

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;
use common::{Dir, is_root};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");
const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");
const BOUND: Duration = Duration::from_secs(60);
/// Ends each transcript command's output: the status follows it.
const MARK: char = '\u{1e}';

#[derive(Debug, Default)]
struct Block {
    doc: String,
    line: usize,
    text: String,
    exit: Option<i32>,
    any_numbers: bool,
    any_state: bool,
    file: Option<String>,
    root: bool,
    /// Programs the block runs that a base system may lack (`jq`, `curl`).
    needs: Vec<String>,
}

/// Every marked block of one Markdown text.
fn blocks(doc: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut in_fence = false;
    while i < lines.len() {
        let t = lines[i].trim();
        // A marker shown inside a block (as docs/architecture.md shows them) marks nothing.
        if t.starts_with("```") {
            in_fence = !in_fence;
        }
        if in_fence {
            i += 1;
            continue;
        }
        let Some(opts) = t
            .strip_prefix("<!-- runnable")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            i += 1;
            continue;
        };
        let mut b = Block {
            doc: doc.to_string(),
            line: i + 1,
            ..Block::default()
        };
        for opt in opts.trim().trim_start_matches(':').split_whitespace() {
            match opt.split_once('=') {
                Some(("exit", n)) => b.exit = Some(n.parse().expect("exit=N")),
                Some(("file", f)) => b.file = Some(f.to_string()),
                Some(("needs", tools)) => b.needs = tools.split(',').map(str::to_string).collect(),
                None if opt == "any-numbers" => b.any_numbers = true,
                None if opt == "any-state" => b.any_state = true,
                None if opt == "root" => b.root = true,
                _ => panic!("{doc}:{}: unknown runnable option {opt:?}", i + 1),
            }
        }
        let fence = lines.get(i + 1).map(|l| l.trim_start()).unwrap_or("");
        assert!(
            fence.starts_with("```"),
            "{doc}:{}: <!-- runnable --> must be right before a fenced block",
            i + 1
        );
        let mut j = i + 2;
        while j < lines.len() && !lines[j].trim_start().starts_with("```") {
            b.text.push_str(lines[j]);
            b.text.push('\n');
            j += 1;
        }
        assert!(j < lines.len(), "{doc}:{}: the block is not closed", i + 1);
        out.push(b);
        i = j + 1;
    }
    out
}

/// A transcript's commands (continuation lines joined) and the lines each must print.
fn transcript(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(cmd) = l.strip_prefix("$ ") {
            let mut cmd = cmd.to_string();
            while cmd.ends_with('\\') {
                cmd.push('\n');
                cmd.push_str(lines.next().unwrap_or(""));
            }
            out.push((cmd, Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push(l.to_string());
        }
    }
    for (_, want) in &mut out {
        while want.last().is_some_and(|l| l.trim().is_empty()) {
            want.pop();
        }
    }
    out
}

/// A line as compared: with `any_state`, a process's state letter after its pid (`3851 S sh`,
/// `"state":"S"`) is any letter (a loaded machine shows a sleep in `D` while its exec reads).
fn normalise(line: &str, any_numbers: bool, any_state: bool) -> String {
    let line = if any_state {
        let pid_state = regex::Regex::new(r#"(\d )[A-Za-z]( |"|$)"#).unwrap();
        let json_state = regex::Regex::new(r#""state":"[A-Za-z]""#).unwrap();
        let l = pid_state.replace_all(line, "$1?$2");
        json_state.replace_all(&l, r#""state":"?""#).into_owned()
    } else {
        line.to_string()
    };
    if !any_numbers {
        return line;
    }
    let mut s = String::new();
    let mut in_digits = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                s.push('N');
            }
            in_digits = true;
        } else {
            s.push(c);
            in_digits = false;
        }
    }
    s
}

/// Runs `script` with `sh` in `dir`, foster first on PATH, standard error into standard output,
/// bounded; its process group is killed after it. Returns its status and output.
fn run_sh(dir: &Path, script: &str, what: &str) -> (i32, String) {
    let bin = Path::new(FOSTER).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec 2>&1 </dev/null\n{script}"))
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("FOSTER_SOCKET")
        .env_remove("FOSTER_VERBOSITY")
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    let pgid = child.id() as i32;
    let mut stdout = child.stdout.take().unwrap();
    // The output is read on a thread; the bound is a poll on the shell's pidfd.
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let fd = foster::process::identity::pidfd_open(pgid).expect("pidfd_open");
    let ended = foster::process::identity::poll_readable(fd.as_raw_fd(), Some(BOUND));
    drop(fd);
    // Whatever the block left running (a background sleep) ends with it.
    // SAFETY: kill with integers; the group is the shell's own.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let st = child.wait().unwrap();
    let out = reader.join().unwrap();
    assert!(
        ended,
        "{what}: did not end within {BOUND:?}; it printed:\n{out}"
    );
    (st.code().unwrap_or_else(|| 128 + st.signal().unwrap()), out)
}

fn check(block: &Block, dir: &Path) -> Result<(), String> {
    let what = format!("{}:{}", block.doc, block.line);
    if let Some(name) = &block.file {
        std::fs::write(dir.join(name), &block.text).unwrap();
        return Ok(());
    }
    let cmds = transcript(&block.text);
    if cmds.is_empty() {
        // A script.
        let (status, out) = run_sh(dir, &block.text, &what);
        let want = block.exit.unwrap_or(0);
        if status != want {
            return Err(format!(
                "{what}: exit status {status}, not {want}; it printed:\n{out}"
            ));
        }
        let echoes = block
            .text
            .lines()
            .filter(|l| l.contains("echo \"exit $?\""));
        let mut got = out.lines().filter(|l| l.starts_with("exit "));
        for l in echoes {
            let line = got.next();
            if let Some((_, n)) = l.rsplit_once("# exit ") {
                let want = format!("exit {}", n.trim());
                if line != Some(want.as_str()) {
                    return Err(format!(
                        "{what}: `{}` printed {line:?}, not {want:?}; it printed:\n{out}",
                        l.trim()
                    ));
                }
            }
        }
        return Ok(());
    }
    // A transcript: each command, then a mark line with its status (the shell's `$?` put back
    // before the next one, for an `echo $?`).
    let mut script = String::new();
    for (cmd, _) in &cmds {
        script.push_str(&format!(
            "{cmd}\n__s=$?; printf '{MARK}%s\\n' \"$__s\"; (exit $__s)\n"
        ));
    }
    let (_, out) = run_sh(dir, &script, &what);
    let mut parts: Vec<(Vec<String>, i32)> = Vec::new();
    let mut cur = Vec::new();
    for line in out.lines() {
        match line.split_once(MARK) {
            Some((before, status)) => {
                if !before.is_empty() {
                    cur.push(before.to_string());
                }
                parts.push((
                    std::mem::take(&mut cur),
                    status.trim().parse().unwrap_or(-1),
                ));
            }
            None => cur.push(line.to_string()),
        }
    }
    if parts.len() != cmds.len() {
        return Err(format!(
            "{what}: {} of {} commands ended; it printed:\n{out}",
            parts.len(),
            cmds.len()
        ));
    }
    for ((cmd, want), (got, status)) in cmds.iter().zip(&parts) {
        if let Some(e) = block.exit
            && *status != e
        {
            return Err(format!("{what}: `{cmd}` exited {status}, not {e}"));
        }
        let w: Vec<String> = want
            .iter()
            .map(|l| normalise(l, block.any_numbers, block.any_state))
            .collect();
        let g: Vec<String> = got
            .iter()
            .map(|l| normalise(l, block.any_numbers, block.any_state))
            .collect();
        if w != g {
            return Err(format!(
                "{what}: `{cmd}` printed\n{}\nwhere the document shows\n{}",
                got.join("\n"),
                want.join("\n")
            ));
        }
    }
    Ok(())
}

/// Whether `tool` is a program in PATH.
fn installed(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

fn documents() -> Vec<PathBuf> {
    let root = Path::new(MANIFEST);
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.push(root.join("README.md"));
    docs
}

#[test]
fn runnable_examples_of_the_docs_do_what_the_docs_show() {
    let root = is_root();
    let mut failures = Vec::new();
    let mut ran = 0;
    for path in documents() {
        let rel = path.strip_prefix(MANIFEST).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let marked = blocks(&rel, &text);
        if marked.is_empty() {
            continue;
        }
        let dir = Dir::new("docs", &rel.replace(['/', '.'], "-"));
        for b in &marked {
            if b.root && !root {
                common::skip::setup(format!("{}:{}: not root", b.doc, b.line));
                continue;
            }
            if let Some(tool) = b.needs.iter().find(|t| !installed(t)) {
                common::skip::setup(format!("{}:{}: {tool} is not installed", b.doc, b.line));
                continue;
            }
            match check(b, &dir.0) {
                Ok(()) => ran += 1,
                Err(e) => failures.push(e),
            }
        }
    }
    println!("{ran} runnable blocks passed");
    assert!(ran > 0, "no block is marked runnable");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_convention_reads_options_transcripts_and_numbers() {
    let md = "x\n<!-- runnable: exit=2 any-numbers -->\n```sh\n$ a \\\n  b\nout 1\n\n$ c\n```\n";
    let b = blocks("t.md", md);
    assert_eq!(b.len(), 1);
    assert_eq!((b[0].exit, b[0].any_numbers, b[0].line), (Some(2), true, 2));
    let t = transcript(&b[0].text);
    assert_eq!(t[0], ("a \\\n  b".to_string(), vec!["out 1".to_string()]));
    assert_eq!(t[1], ("c".to_string(), vec![]));
    assert_eq!(
        normalise("p3851 [label=\"3851 R\"]", true, false),
        "pN [label=\"N R\"]"
    );
    assert_eq!(normalise("├─3852 D sleep 2", true, true), "├─N ? sleep N");
    assert_eq!(
        normalise(r#"{"pid":3,"state":"D"}"#, false, true),
        r#"{"pid":3,"state":"?"}"#
    );
    let b = blocks("t.md", "<!-- runnable: needs=jq,curl -->\n```sh\njq\n```\n");
    assert_eq!(b[0].needs, ["jq", "curl"]);
    assert!(installed("sh") && !installed("no-such-program-of-foster"));
    assert!(blocks("t.md", "```sh\nfoster\n```\n").is_empty());
    assert!(blocks("t.md", "```\n<!-- runnable -->\n```\n").is_empty());
}
