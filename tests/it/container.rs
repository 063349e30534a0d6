//! The container examples, run for real: `examples/Dockerfile`'s image root assembled as a
//! container runtime would (each `COPY`, `ENV`, `RUN`, `ENTRYPOINT` and `CMD`, read from the
//! Dockerfile itself) and run as PID 1 of a new PID namespace (`unshare --pid --fork
//! --mount-proc` and `chroot`, root only, as tests/init.rs does), then stopped by SIGTERM as
//! `docker stop` does; `examples/kubernetes/pod.yaml` decoded by `kubectl` (offline, when it is
//! installed), checked for what the docs say of it, and its `foster run` configuration checked
//! by `foster run --check` inside that image root, against the image's own programs; and
//! docs/init.md's copy of the Dockerfile compared with the file.
//!
//! The image's `foster` is the binary under test with the shared libraries `ldd` names copied
//! beside it (the Dockerfile's static musl build is not needed); its `busybox` is the host's
//! static one (Debian's busybox-static; the test skips, saying so, without it).

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common;
use common::{Dir, children_of, descendants_of, is_root, process};

const FOSTER: &str = env!("CARGO_BIN_EXE_foster");
const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// What a `docker run` of the image would be given.
struct Image {
    root: PathBuf,
    env: Vec<(String, String)>,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// Why the image cannot be assembled and run here, if it cannot.
fn missing_tools() -> Option<String> {
    if !is_root() {
        return Some("not root: unshare --pid and chroot need root".into());
    }
    for tool in ["unshare", "chroot", "ldd"] {
        if which(tool).is_none() {
            return Some(format!("{tool} is not installed"));
        }
    }
    match static_busybox() {
        Some(_) => None,
        None => Some("no static busybox (Debian's busybox-static) to put in the image".into()),
    }
}

fn static_busybox() -> Option<PathBuf> {
    let p = which("busybox")?;
    let out = Command::new("ldd").arg(&p).output().ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (text.contains("not a dynamic executable") || text.contains("statically linked")).then_some(p)
}

/// Copies the binary under test into `root` at `dest`, with every shared library it loads at
/// its own path, so that it runs in the chroot as the static build would.
fn copy_foster(root: &Path, dest: &str) {
    let to = root.join(dest.trim_start_matches('/'));
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    copy_program(Path::new(FOSTER), &to);
    let out = Command::new("ldd").arg(FOSTER).output().expect("run ldd");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux... (0x...)"
        let lib = line
            .split("=>")
            .last()
            .and_then(|s| s.split_whitespace().next())
            .filter(|s| s.starts_with('/'));
        if let Some(lib) = lib {
            let to = root.join(lib.trim_start_matches('/'));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            copy_program(Path::new(lib), &to);
        }
    }
}

/// Copies a program (or a library) into the image by `cp`, in a process of its own, not by
/// `std::fs::copy` here: a file this multi-threaded test process opens for writing is also open
/// in every child another test forks meanwhile, until that child's exec, and executing the file
/// then fails with `ETXTBSY` (busybox's `--install` exited 126 that way).
fn copy_program(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(st.success(), "cp {} {}: {st}", from.display(), to.display());
}

/// The Dockerfile's instructions, its comments and line continuations taken out.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if cur.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(part) = t.strip_suffix('\\') {
            cur.push_str(part);
            cur.push(' ');
            continue;
        }
        cur.push_str(t);
        let (word, rest) = cur.split_once(' ').unwrap_or((cur.as_str(), ""));
        out.push((word.to_uppercase(), rest.trim().to_string()));
        cur.clear();
    }
    out
}

fn exec_form(what: &str, arg: &str) -> Vec<String> {
    serde_json::from_str(arg)
        .unwrap_or_else(|e| panic!("{what} {arg}: not the exec (JSON) form this test reads: {e}"))
}

/// Builds examples/Dockerfile's image root in `dir`, as `docker build` would.
fn build_image(dir: &Dir) -> Image {
    let dockerfile = std::fs::read_to_string(Path::new(MANIFEST).join("examples/Dockerfile"))
        .expect("read examples/Dockerfile");
    let root = dir.path("root");
    std::fs::create_dir_all(root.join("proc")).unwrap();
    // What a runtime gives every container besides the image: /proc (mounted at the run) and
    // /dev/null (busybox's sh runs a background job's input from it).
    std::fs::create_dir_all(root.join("dev")).unwrap();
    let null = std::ffi::CString::new(root.join("dev/null").into_os_string().into_encoded_bytes())
        .unwrap();
    // SAFETY: a NUL-terminated path; character device 1:3, as the host's /dev/null.
    let rc = unsafe { libc::mknod(null.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(
        rc,
        0,
        "mknod /dev/null: {}",
        std::io::Error::last_os_error()
    );
    let mut image = Image {
        root: root.clone(),
        env: Vec::new(),
        entrypoint: Vec::new(),
        cmd: Vec::new(),
    };
    for (word, arg) in instructions(&dockerfile) {
        match word.as_str() {
            "FROM" => assert_eq!(arg, "scratch", "the example image is built FROM scratch"),
            "COPY" => {
                let (src, dest) = arg.split_once(' ').expect("COPY SRC DEST");
                match src {
                    "foster" => copy_foster(&root, dest.trim()),
                    "busybox" => {
                        let to = root.join(dest.trim().trim_start_matches('/'));
                        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                        copy_program(&static_busybox().unwrap(), &to);
                    }
                    other => panic!("COPY of {other}: this test knows foster and busybox"),
                }
            }
            "RUN" => {
                let argv = exec_form("RUN", &arg);
                let st = Command::new(which("chroot").unwrap())
                    .arg(&root)
                    .args(&argv)
                    .env_clear()
                    .env("PATH", "/bin")
                    .status()
                    .expect("run chroot");
                assert!(st.success(), "RUN {argv:?} in the image root: {st}");
            }
            "ENV" => {
                for pair in arg.split_whitespace() {
                    let (k, v) = pair.split_once('=').expect("ENV NAME=VALUE ...");
                    image.env.push((k.to_string(), v.to_string()));
                }
            }
            "ENTRYPOINT" => image.entrypoint = exec_form("ENTRYPOINT", &arg),
            "CMD" => image.cmd = exec_form("CMD", &arg),
            other => panic!("{other}: an instruction this test does not read"),
        }
    }
    assert_eq!(
        image.entrypoint[..2],
        ["/foster".to_string(), "init".to_string()],
        "foster init is the image's entrypoint"
    );
    image
}

/// `docker run IMAGE [ARGS]`: PID 1 of a new PID namespace with its own /proc, in the root.
fn run_command(image: &Image, args: Option<&[&str]>) -> Command {
    let mut c = Command::new(which("unshare").unwrap());
    c.args(["--pid", "--fork", "--mount"])
        .arg(format!(
            "--mount-proc={}",
            image.root.join("proc").display()
        ))
        .arg(which("chroot").unwrap())
        .arg(&image.root)
        .args(&image.entrypoint);
    match args {
        Some(a) => c.args(a),
        None => c.args(&image.cmd),
    };
    c.env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .envs(image.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    c
}

fn wait_bounded(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    common::child::wait_within(child, std::time::Duration::from_secs(60)).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what} did not end within 60 s")
    })
}

#[test]
fn dockerfile_image_runs_foster_init_as_pid1_and_stops_on_sigterm() {
    if let Some(why) = missing_tools() {
        common::skip::setup(why);
        return;
    }
    let dir = Dir::new("container", "image");
    let image = build_image(&dir);
    assert!(
        image.root.join("bin/sh").exists(),
        "RUN installed busybox's sh"
    );

    let mut cmd = run_command(&image, None);
    cmd.env("FOSTER_VERBOSITY", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn unshare");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), "started", "the image's CMD ran");

    // foster is unshare's child (PID 1 inside); below it the shell's exec'd sleep and the
    // orphan it left, which foster, as PID 1, adopted.
    let unshare = child.id() as i32;
    let foster = *children_of(unshare).first().expect("unshare forked foster");
    let tree = descendants_of(foster);
    assert_eq!(
        tree.len(),
        2,
        "the program and its orphan under foster: {tree:?}"
    );
    for id in &tree {
        assert_eq!(
            process(id.pid).unwrap().ppid,
            foster,
            "{id:?} is foster's child"
        );
    }

    // docker stop: SIGTERM to PID 1, from outside the namespace.
    // SAFETY: kill with integers.
    assert_eq!(unsafe { libc::kill(foster, libc::SIGTERM) }, 0);
    let st = wait_bounded(&mut child, "the container");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(
        st.code(),
        Some(0),
        "SIGTERM forwarded, the program's 143 expected (FOSTER_EXPECT): exit 0; got {st:?} (signal {:?}); foster said:\n{err}",
        st.signal()
    );
    assert!(
        err.contains("SIGTERM"),
        "foster said it forwarded SIGTERM and ended the rest (FOSTER_WAIT_ALL):\n{err}"
    );
    for id in &tree {
        let left = process(id.pid).filter(|n| n.identity == *id);
        assert!(left.is_none(), "{id:?} is gone with the container");
    }
}

/// docs/init.md shows examples/Dockerfile: its `dockerfile` block has the file's instructions,
/// the same, in the same order (the file's comments aside).
#[test]
fn init_md_shows_the_example_dockerfile() {
    let file = std::fs::read_to_string(Path::new(MANIFEST).join("examples/Dockerfile")).unwrap();
    let doc = std::fs::read_to_string(Path::new(MANIFEST).join("docs/init.md")).unwrap();
    let block: String = doc
        .lines()
        .skip_while(|l| l.trim() != "```dockerfile")
        .skip(1)
        .take_while(|l| l.trim() != "```")
        .map(|l| format!("{l}\n"))
        .collect();
    let shown = instructions(&block);
    assert!(!shown.is_empty(), "no ```dockerfile block in docs/init.md");
    assert_eq!(
        shown,
        instructions(&file),
        "docs/init.md and examples/Dockerfile differ"
    );
}

/// The `pod.toml` of the pod's ConfigMap, as the YAML block scalar holds it.
fn pod_toml(yaml: &str) -> String {
    let mut lines = yaml
        .lines()
        .skip_while(|l| l.trim() != "pod.toml: |")
        .skip(1);
    let first = lines.next().expect("a pod.toml: | block");
    let indent = first.len() - first.trim_start().len();
    let mut text = format!("{}\n", &first[indent..]);
    for l in lines {
        if !l.trim().is_empty() && l.len() - l.trim_start().len() < indent {
            break;
        }
        text.push_str(l.get(indent..).unwrap_or(""));
        text.push('\n');
    }
    text
}

#[test]
fn kubernetes_pod_spec_decodes_and_its_config_checks_in_the_image() {
    let path = Path::new(MANIFEST).join("examples/kubernetes/pod.yaml");
    let yaml = std::fs::read_to_string(&path).expect("read examples/kubernetes/pod.yaml");

    match which("kubectl") {
        None => common::skip::host("part: the kubectl decoding: kubectl is not installed"),
        Some(kubectl) => {
            // Offline: --local decodes every object of the file without a cluster (kubectl's
            // dry runs of apply and create ask a server for its API and schema).
            let out = Command::new(kubectl)
                .args(["label", "--local", "--dry-run=client", "-o", "json", "-f"])
                .arg(&path)
                .arg("checked=yes")
                .output()
                .expect("run kubectl");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "kubectl decodes the pod spec: {}\n{text}",
                String::from_utf8_lossy(&out.stderr)
            );
            // One JSON document an object, in the file's order.
            let items: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&text)
                .into_iter()
                .collect::<Result<_, _>>()
                .expect("kubectl's JSON");
            // An older kubectl prints them as one List.
            let items = match items.as_slice() {
                [list] if list["kind"] == "List" => list["items"].as_array().unwrap().clone(),
                _ => items,
            };
            let kinds: Vec<&str> = items.iter().filter_map(|i| i["kind"].as_str()).collect();
            assert_eq!(kinds, ["ConfigMap", "Pod"]);
            let pod = &items[1];
            let spec = &pod["spec"];
            assert_eq!(spec["shareProcessNamespace"], false);
            let c = &spec["containers"][0];
            let command: Vec<&str> = c["command"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s.as_str())
                .collect();
            assert_eq!(command[..2], ["/foster", "init"], "foster init is PID 1");
            let args: Vec<&str> = c["args"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s.as_str())
                .collect();
            assert_eq!(args[..2], ["/foster", "run"], "foster run is its program");
            assert_eq!(args.last(), Some(&"/etc/foster/pod.toml"));
            // Every mount names a volume of the pod; the configuration comes from the ConfigMap.
            let volumes: Vec<&str> = spec["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v["name"].as_str())
                .collect();
            for m in c["volumeMounts"].as_array().unwrap() {
                assert!(volumes.contains(&m["name"].as_str().unwrap()), "{m}");
            }
            let config = spec["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == "config")
                .unwrap();
            assert_eq!(config["configMap"]["name"], items[0]["metadata"]["name"]);
            assert!(items[0]["data"]["pod.toml"].is_string());
        }
    }

    if let Some(why) = missing_tools() {
        common::skip::setup(format!("part: the check in the image: {why}"));
        return;
    }
    // The ConfigMap's configuration, checked by foster run --check inside the image, where
    // its programs (busybox's httpd and tail) are.
    let dir = Dir::new("container", "pod");
    let image = build_image(&dir);
    let etc = image.root.join("etc/foster");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("pod.toml"), pod_toml(&yaml)).unwrap();
    let out = run_command(
        &image,
        Some(&["/foster", "run", "--check", "/etc/foster/pod.toml"]),
    )
    .output()
    .expect("run foster run --check");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "foster run --check in the image:\n{text}"
    );
    assert!(text.contains("valid, 2 helpers"), "{text}");
}
