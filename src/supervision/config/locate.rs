//! Where a configuration comes from: a file (a regular file of at most [`MAX_CONFIG_BYTES`]),
//! standard input, or a text; read, then parsed and checked to the [`Scope`] asked.

use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::collect;
use super::error::{ConfigError, ConfigErrors, line_col};
use super::schema::{Config, Helper};
use super::system;

/// The largest configuration foster reads: 16 MiB. A larger file, or standard input that goes
/// on longer, is an error (the bound is applied while reading, whatever the file claims).
pub const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// What a reading checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The file alone: what `foster run` checks before it starts anything.
    #[default]
    File,
    /// The file, and the system the helpers would run on: each program found and executable
    /// by the user its helper runs as, each working directory a directory that user can enter,
    /// each user and group known to the user database, each log file one foster would open
    /// (`foster run --check`). What is true now
    /// may not be at launch: a launch that fails then counts as an exit (127 for a program not
    /// found) and goes through the restart rules.
    System,
}

/// Refuses what is not a regular file (a directory, FIFO, device or socket): reading one could
/// block, never end, or act on a device.
fn regular_file(meta: &Metadata) -> Result<(), NotRegular> {
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "of an unknown type"
    };
    Err(NotRegular(what))
}

/// The configuration is not a regular file: what it is instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the configuration is {0}, not a regular file: expected the path of a file, or - to read \
     standard input"
)]
struct NotRegular(&'static str);

impl Config {
    /// Reads and validates `path`: a regular file (refused before it is opened, and checked
    /// again on the descriptor opened), read through [`Config::read`].
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        Config::load_with(path, Scope::File)
    }

    /// [`Config::load`], checking what `scope` says.
    pub fn load_with(path: &Path, scope: Scope) -> Result<Config, ConfigErrors> {
        let fail = |message: String| ConfigError::whole(path, message);
        let cannot = |e: std::io::Error| fail(format!("cannot read the configuration: {e}"));
        let not_regular = |e: NotRegular| fail(e.to_string());
        regular_file(&std::fs::metadata(path).map_err(cannot)?).map_err(not_regular)?;
        // Non-blocking, so that a file swapped for a FIFO since the check cannot hang the open.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        regular_file(&meta).map_err(not_regular)?;
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(fail(too_large()).into());
        }
        Config::read_with(path, file, scope)
    }

    /// Reads at most [`MAX_CONFIG_BYTES`] from `input` (a file, or standard input for `-`),
    /// then parses it as [`Config::parse`] does; `file` names it in errors. More input than
    /// the bound, or text that is not UTF-8, is an error.
    pub fn read(file: &Path, input: impl Read) -> Result<Config, ConfigErrors> {
        Config::read_with(file, input, Scope::File)
    }

    /// [`Config::read`], checking what `scope` says.
    pub fn read_with(file: &Path, input: impl Read, scope: Scope) -> Result<Config, ConfigErrors> {
        let mut bytes = Vec::new();
        input
            .take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ConfigError::whole(file, format!("cannot read the configuration: {e}")))?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::whole(file, too_large()).into());
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let good = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let before = String::from_utf8_lossy(&bytes[..good]);
                let (line, column) = line_col(&before, good).unwrap_or((1, 1));
                return Err(ConfigError {
                    file: file.to_path_buf(),
                    line: Some(line),
                    column: Some(column),
                    helper: None,
                    key: None,
                    message: format!(
                        "the configuration is not UTF-8 text: byte 0x{:02x} cannot start a \
                         character here",
                        bytes.get(good).copied().unwrap_or_default()
                    ),
                }
                .into());
            }
        };
        Config::parse_with(file, &text, scope)
    }

    /// Parses and validates `text`, naming `file` in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Config, ConfigErrors> {
        Config::parse_with(file, text, Scope::File)
    }

    /// [`Config::parse`], checking what `scope` says: every mistake is collected (see
    /// `collect.rs`), then the checks across fields run on what could be read, then, for
    /// [`Scope::System`], the checks against the system.
    pub fn parse_with(file: &Path, text: &str, scope: Scope) -> Result<Config, ConfigErrors> {
        let doc = collect::Document::parse(file, text)?;
        let read = doc.deserialize::<Config, Helper>("helper", |c, helpers| c.helpers = helpers);
        let mut errors = read.mistakes.clone();
        if let Some(config) = &read.value {
            config.validate(&doc, &read, &mut errors);
            if scope == Scope::System {
                system::check(config, &doc, &read, &mut errors);
            }
        }
        match read.value {
            Some(mut config) if errors.is_empty() => {
                config.warnings = config.warnings_in(&doc);
                Ok(config)
            }
            _ => Err(ConfigErrors::new(file, errors, read.more)),
        }
    }
}

fn too_large() -> String {
    format!(
        "the configuration is larger than {} MiB ({MAX_CONFIG_BYTES} bytes), the most foster \
         reads",
        MAX_CONFIG_BYTES >> 20
    )
}
