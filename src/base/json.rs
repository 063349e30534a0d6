//! The version of foster's JSON: one schema version for every JSON document and line foster
//! writes (`tree --json`, the control protocol's replies, the events log, `run --output json`,
//! `qualify --json`, `identity --json`).
//!
//! Owns [`VERSION`] and nothing else. `docs/json.md` describes every kind, with a JSON Schema
//! per kind under `docs/schema/`; a change that breaks a reader of one of them raises it.

/// The schema version every JSON object foster writes carries as `"version"` (on each line of
/// a stream, on the document otherwise).
pub const VERSION: u32 = 1;
