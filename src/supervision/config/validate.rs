//! The checks across fields of a configuration read ([`Config::validate`]): the orphan
//! policy, at least one helper, and each helper's fields together ([`HelperCheck`]).

use std::collections::BTreeMap;
use std::path::Path;

use super::checks;
use super::collect;
use super::depends;
use super::error::ConfigError;
use super::schema::{Config, Helper};
use crate::gate::policy::MAX_GENERATIONS;

impl Config {
    /// [`Config::warnings`] of a valid config read from `doc`: a health check whose `timeout`
    /// is not shorter than its `interval` ([`checks::HealthSection::warning`]).
    pub(super) fn warnings_in(&self, doc: &collect::Document<'_>) -> Vec<ConfigError> {
        let helpers = collect::KeyPath::root().key("helper");
        let mut warnings = Vec::new();
        for (hi, h) in self.helpers.iter().enumerate() {
            if let Some((field, message)) = h.health.as_ref().and_then(|hs| hs.warning()) {
                let at = helpers.index(hi).key("health").key(field);
                warnings.push(doc.error_at(&at, None, message));
            }
        }
        warnings
    }

    /// The checks across fields, on what could be read; those that involve a field taken out
    /// for a mistake of its own are skipped.
    pub(super) fn validate(
        &self,
        doc: &collect::Document<'_>,
        read: &collect::Read<Config>,
        errors: &mut Vec<ConfigError>,
    ) {
        use collect::KeyPath;
        let orphan = KeyPath::root().key("supervisor").key("orphan_policy");
        if !read.skipped(&orphan)
            && let Err(e) = self.supervisor.orphan_policy.check()
        {
            errors.push(doc.error_at(
                &orphan.key(e.field),
                e.span,
                format!("the orphan policy: {}", e.message),
            ));
        }
        let helpers = KeyPath::root().key("helper");
        if self.helpers.is_empty() && !read.skipped(&helpers) {
            errors.push(ConfigError::whole(
                doc.file(),
                "no helper declared: expected at least one [[helper]] table with a name and a \
                 command"
                    .into(),
            ));
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let mut logs: BTreeMap<&Path, usize> = BTreeMap::new();
        for (hi, h) in self.helpers.iter().enumerate() {
            let at = helpers.index(hi);
            let mut check = HelperCheck {
                doc,
                read,
                errors: &mut *errors,
            };
            check.log(h, hi, &at, &mut logs);
            check.name(h, hi, &at, &mut seen);
            check.generations(h, &at);
            check.probes(h, &at);
            check.backoff(h, &at);
        }
        depends::check(self, doc, read, errors);
    }
}

/// The checks of one helper across its fields ([`Config::validate`]'s), each skipped when the
/// field was taken out for a mistake of its own.
struct HelperCheck<'a, 'd> {
    doc: &'a collect::Document<'d>,
    read: &'a collect::Read<Config>,
    errors: &'a mut Vec<ConfigError>,
}

impl<'a, 'd> HelperCheck<'a, 'd> {
    /// A log file only with captured output, and no two helpers with the same file.
    fn log<'h>(
        &mut self,
        h: &'h Helper,
        hi: usize,
        at: &collect::KeyPath,
        logs: &mut BTreeMap<&'h Path, usize>,
    ) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let log = at.key("log");
        if let Some(spec) = h.log.as_ref().filter(|_| !read.skipped(&log)) {
            if h.output != crate::supervision::output::Mode::Capture {
                errors.push(doc.error_at(
                    &log,
                    None,
                    format!(
                        "a log file takes the lines foster captures, but output is {:?}: \
                         remove output, or set it to \"capture\"",
                        serde_json::to_value(h.output)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    ),
                ));
            }
            if let Some(first) = logs.get(spec.file.as_path()) {
                errors.push(doc.error_at(
                    &log.key("file"),
                    None,
                    format!(
                        "{} is helper[{}]'s log file already: each helper needs a file of \
                         its own (their rotations would rename each other's)",
                        spec.file.display(),
                        first + 1
                    ),
                ));
            } else {
                logs.insert(spec.file.as_path(), hi);
            }
        }
    }

    /// No two helpers with the same name.
    fn name<'h>(
        &mut self,
        h: &'h Helper,
        hi: usize,
        at: &collect::KeyPath,
        seen: &mut BTreeMap<&'h str, usize>,
    ) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let name = at.key("name");
        if !read.skipped(&name) {
            if let Some(first) = seen.get(h.name()) {
                errors.push(doc.error_at(
                    &name,
                    Some(h.name.span()),
                    format!(
                        "duplicate helper name {:?}: helper[{}] has it already; each \
                         helper needs its own name",
                        h.name(),
                        first + 1
                    ),
                ));
            } else {
                seen.insert(h.name(), hi);
            }
        }
    }

    /// At most [`MAX_GENERATIONS`] generations, each consistent.
    fn generations(&mut self, h: &Helper, at: &collect::KeyPath) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let generations = at.key("generation");
        if h.generations.len() > MAX_GENERATIONS && !read.skipped(&generations) {
            errors.push(doc.error_at(
                &generations,
                None,
                format!(
                    "{} generations declared: at most {MAX_GENERATIONS} (the last one \
                     applies to every deeper generation)",
                    h.generations.len()
                ),
            ));
        }
        for (gi, g) in h.generations.iter().enumerate() {
            let at = generations.index(gi);
            if read.skipped(&at) {
                continue;
            }
            if let Err(e) = g.check() {
                errors.push(doc.error_at(&at.key(e.field), e.span, e.message));
            }
        }
    }

    /// The readiness and health checks, each well formed; a log check only of captured output.
    fn probes(&mut self, h: &Helper, at: &collect::KeyPath) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let ready = at.key("ready");
        if let Some(r) = &h.ready
            && !read.skipped(&ready)
        {
            match r.check() {
                Err(e) => {
                    let path = if e.field.is_empty() {
                        ready.clone()
                    } else {
                        ready.key(e.field)
                    };
                    errors.push(doc.error_at(&path, e.span, e.message));
                }
                Ok(checks::ReadyCheck::Log(_))
                    if h.output != crate::supervision::output::Mode::Capture
                        && !read.skipped(&at.key("output")) =>
                {
                    errors.push(doc.error_at(
                        &ready.key("log"),
                        None,
                        format!(
                            "log reads the helper's captured output, and its output is {}: \
                             leave output out (capture is the default) or choose another \
                             readiness check",
                            serde_json::to_value(h.output)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_string))
                                .unwrap_or_default()
                        ),
                    ));
                }
                Ok(_) => {}
            }
        }
        let health = at.key("health");
        if let Some(hs) = &h.health
            && !read.skipped(&health)
            && let Err(e) = hs.probe()
        {
            let path = if e.field.is_empty() {
                health.clone()
            } else {
                health.key(e.field)
            };
            errors.push(doc.error_at(&path, e.span, e.message));
        }
    }

    /// The backoff's maximum not below its start.
    fn backoff(&mut self, h: &Helper, at: &collect::KeyPath) {
        let (doc, read, errors) = (self.doc, self.read, &mut *self.errors);
        let backoff = at.key("backoff");
        let b = &h.backoff;
        if b.max < b.initial && !read.skipped(&backoff) {
            errors.push(doc.error_at(
                &backoff.key("max"),
                None,
                format!(
                    "backoff.max ({}) is shorter than backoff.initial ({}): expected max >= \
                     initial",
                    crate::base::duration::Text(b.max.0),
                    crate::base::duration::Text(b.initial.0)
                ),
            ));
        }
    }
}
