//! `depends_on`: what a helper waits for, as written and as checked.
//!
//! [`DependsOn`] (the table `{ db = "ready", migrate = "completed" }` or the list `["db"]`) is
//! read in `schema.rs`; here are its checks across the file ([`check`], part of
//! `Config::validate`): every name must be another helper's, a list names
//! each once, `completed` cannot be asked of a helper that is always restarted, and the graph
//! (petgraph) has no cycle: each cycle is one mistake naming it, `a -> b -> c -> a`.

use std::collections::HashMap;

use super::collect::{Document, KeyPath, Read};
use super::error::ConfigError;
use super::schema::{Config, DependsOn, Helper, RestartMode};
use crate::process::state::Condition;
use petgraph::graph::{DiGraph, NodeIndex};

/// Where dependency `j` of the helper at `at` was written.
fn item_path(at: &KeyPath, deps: &DependsOn, j: usize) -> KeyPath {
    let key = at.key("depends_on");
    if deps.listed {
        key.index(j)
    } else {
        key.key(&deps.items[j].0)
    }
}

/// The names of a configuration's helpers, for a message: the first few, then how many more.
fn names_text(config: &Config) -> String {
    const SHOWN: usize = 8;
    let names: Vec<&str> = config.helpers.iter().map(|h| h.name()).collect();
    let mut text = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// The checks of every helper's `depends_on` against the file: names known (not the helper
/// itself), each listed once, `completed` only of a helper that can complete, and no cycle.
pub(super) fn check(
    config: &Config,
    doc: &Document<'_>,
    read: &Read<Config>,
    errors: &mut Vec<ConfigError>,
) {
    let helpers = KeyPath::root().key("helper");
    // The first helper of each name (a duplicate name is a mistake of its own).
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, h) in config.helpers.iter().enumerate() {
        index.entry(h.name()).or_insert(i);
    }
    let names_taken_out =
        (0..config.helpers.len()).any(|i| read.skipped(&helpers.index(i).key("name")));
    let mut graph: DiGraph<usize, ()> = DiGraph::new();
    let nodes: Vec<NodeIndex> = (0..config.helpers.len())
        .map(|i| graph.add_node(i))
        .collect();
    for (hi, h) in config.helpers.iter().enumerate() {
        let at = helpers.index(hi);
        if read.skipped(&at.key("depends_on")) || read.skipped(&at.key("name")) {
            continue;
        }
        let deps = &h.depends_on;
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (j, (name, condition)) in deps.items.iter().enumerate() {
            let path = item_path(&at, deps, j);
            let (dep, mistake) = match seen.insert(name, j) {
                Some(first) => (
                    None,
                    Some(format!(
                        "{name:?} is listed twice (entries {} and {}): list each dependency once",
                        first + 1,
                        j + 1
                    )),
                ),
                None => entry(config, &index, names_taken_out, h, name, *condition),
            };
            if let Some(message) = mistake {
                errors.push(doc.error_at(&path, None, message));
            }
            if let Some(d) = dep {
                // An edge from the helper to what it waits for: a cycle reads in that order.
                graph.add_edge(nodes[hi], nodes[d], ());
            }
        }
    }
    report_cycles(config, doc, &graph, &nodes, errors);
}

/// Entry `name` of helper `h`'s `depends_on`: the helper it names (an edge of the graph), and
/// its mistake, if it makes one.
fn entry(
    config: &Config,
    index: &HashMap<&str, usize>,
    names_taken_out: bool,
    h: &Helper,
    name: &str,
    condition: Condition,
) -> (Option<usize>, Option<String>) {
    if name == h.name() {
        let message = format!(
            "helper {name:?} depends on itself (a dependency cycle: {name} -> \
             {name}): it could never be launched"
        );
        return (None, Some(message));
    }
    let Some(&d) = index.get(name) else {
        // With a name taken out, it may be that name written wrong: reported already.
        let message = (!names_taken_out).then(|| {
            format!(
                "no helper is named {name:?}: expected the name of a helper of this \
                 file ({})",
                names_text(config)
            )
        });
        return (None, message);
    };
    let dep = &config.helpers[d];
    let message =
        (condition == Condition::Completed && dep.restart == RestartMode::Always).then(|| {
            format!(
                "helper {name:?} has restart = \"always\": it is launched again \
                 whenever it ends, so it never completes; expected \"started\" or \
                 \"ready\", or another restart rule for {name:?}"
            )
        });
    (Some(d), message)
}

/// A mistake for each dependency cycle, at the entry of its first helper that leads on along
/// it.
fn report_cycles(
    config: &Config,
    doc: &Document<'_>,
    graph: &DiGraph<usize, ()>,
    nodes: &[NodeIndex],
    errors: &mut Vec<ConfigError>,
) {
    let helpers = KeyPath::root().key("helper");
    for scc in petgraph::algo::tarjan_scc(graph) {
        if scc.len() < 2 {
            continue;
        }
        let mut members: Vec<usize> = scc.iter().map(|n| graph[*n]).collect();
        members.sort_unstable();
        let start = members[0];
        let cycle = cycle_from(graph, nodes, start, &members);
        let names: Vec<&str> = cycle.iter().map(|&i| config.helpers[i].name()).collect();
        let h = &config.helpers[start];
        let at = helpers.index(start);
        let next = config.helpers[cycle[1]].name();
        let j = h
            .depends_on
            .items
            .iter()
            .position(|(n, _)| n == next)
            .unwrap_or(0);
        errors.push(doc.error_at(
            &item_path(&at, &h.depends_on, j),
            None,
            format!(
                "dependency cycle: {} -> {}: none of these helpers could ever be launched; \
                 remove one of these dependencies",
                names.join(" -> "),
                names[0]
            ),
        ));
    }
}

/// A cycle through `start` within `members` (a strongly connected set), as helper indices
/// from `start`, each depending on the next, the last on `start`.
fn cycle_from(
    graph: &DiGraph<usize, ()>,
    nodes: &[NodeIndex],
    start: usize,
    members: &[usize],
) -> Vec<usize> {
    // A breadth-first search from start's dependencies back to start: the shortest cycle.
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        let mut next: Vec<usize> = graph.neighbors(nodes[v]).map(|n| graph[n]).collect();
        next.sort_unstable();
        for w in next {
            if w == start {
                let mut path = vec![v];
                let mut x = v;
                while x != start {
                    x = parent[&x];
                    path.push(x);
                }
                path.reverse();
                return path;
            }
            if members.binary_search(&w).is_ok() && !parent.contains_key(&w) && w != start {
                parent.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    members.to_vec()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(text: &str) -> Result<Config, crate::supervision::config::ConfigErrors> {
        Config::parse(Path::new("f.toml"), text)
    }

    fn helper(name: &str, extra: &str) -> String {
        format!("[[helper]]\nname = \"{name}\"\ncommand = [\"x\"]\n{extra}\n")
    }

    #[test]
    fn a_table_comes_by_name_and_a_list_means_started() {
        let c = parse(&format!(
            "{}{}{}{}",
            helper("db", ""),
            helper("migrate", ""),
            helper("cache", ""),
            helper(
                "web",
                "depends_on = { migrate = \"completed\", db = \"ready\", cache = \"started\" }"
            )
        ))
        .unwrap();
        // A table comes by name (TOML tables have no order).
        assert_eq!(
            c.helpers[3].depends_on.items,
            [
                ("cache".to_string(), Condition::Started),
                ("db".to_string(), Condition::Ready),
                ("migrate".to_string(), Condition::Completed),
            ]
        );
        let c = parse(&format!(
            "{}{}",
            helper("db", ""),
            helper("web", "depends_on = [\"db\"]")
        ))
        .unwrap();
        assert_eq!(
            c.helpers[1].depends_on,
            DependsOn {
                items: vec![("db".to_string(), Condition::Started)],
                listed: true
            }
        );
        assert!(c.helpers[0].depends_on.items.is_empty());
    }

    #[test]
    fn every_mistake_of_depends_on_is_named_where_it_was_written() {
        let e = parse(&format!(
            "{}{}",
            helper("db", "restart = \"always\""),
            helper(
                "web",
                "depends_on = { dbx = \"ready\", db = \"completed\", web = \"started\" }"
            )
        ))
        .unwrap_err();
        let all: Vec<(Option<String>, String)> = e
            .iter()
            .map(|e| (e.key.clone(), e.message.clone()))
            .collect();
        assert_eq!(all.len(), 3, "{e}");
        assert_eq!(all[0].0.as_deref(), Some("helper[2].depends_on.dbx"), "{e}");
        assert!(
            all[0].1.contains("no helper is named \"dbx\"") && all[0].1.contains("\"db\", \"web\""),
            "{e}"
        );
        assert_eq!(all[1].0.as_deref(), Some("helper[2].depends_on.db"), "{e}");
        assert!(all[1].1.contains("never completes"), "{e}");
        assert_eq!(all[2].0.as_deref(), Some("helper[2].depends_on.web"), "{e}");
        assert!(all[2].1.contains("web -> web"), "{e}");
        assert!(e.iter().all(|e| e.helper.as_deref() == Some("web")), "{e}");

        let e = parse(&format!(
            "{}{}",
            helper("db", ""),
            helper("web", "depends_on = [\"db\", \"db\"]")
        ))
        .unwrap_err();
        assert_eq!(e.len(), 1, "{e}");
        assert_eq!(
            e.first().key.as_deref(),
            Some("helper[2].depends_on[2]"),
            "{e}"
        );
        assert!(e.first().message.contains("listed twice"), "{e}");

        for (value, why) in [
            (
                "{ db = \"up\" }",
                "is \"up\": expected \"started\", \"ready\" or \"completed\"",
            ),
            ("{ db = 1 }", "not a string"),
            ("\"db\"", "expected a table of helper names"),
            ("[\"\"]", "cannot be a helper's name"),
        ] {
            let e = parse(&format!(
                "{}{}",
                helper("db", ""),
                helper("web", &format!("depends_on = {value}"))
            ))
            .unwrap_err();
            assert_eq!(e.len(), 1, "{value}: {e}");
            assert!(e.first().message.contains(why), "{value}: {e}");
            assert!(
                e.first()
                    .key
                    .as_deref()
                    .unwrap()
                    .starts_with("helper[2].depends_on"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_cycle_is_one_mistake_naming_it_in_order() {
        let e = parse(&format!(
            "{}{}{}{}",
            helper("a", "depends_on = [\"b\"]"),
            helper("b", "depends_on = { c = \"ready\" }"),
            helper("c", "depends_on = [\"a\"]"),
            helper("d", "depends_on = [\"a\"]"),
        ))
        .unwrap_err();
        assert_eq!(e.len(), 1, "{e}");
        let m = e.first();
        assert!(
            m.message.contains("dependency cycle: a -> b -> c -> a"),
            "{e}"
        );
        assert_eq!(m.key.as_deref(), Some("helper[1].depends_on[1]"), "{e}");
        assert_eq!(m.helper.as_deref(), Some("a"), "{e}");
        // Two cycles: two mistakes; a diamond is no cycle.
        let e = parse(&format!(
            "{}{}{}{}",
            helper("a", "depends_on = [\"b\"]"),
            helper("b", "depends_on = [\"a\"]"),
            helper("c", "depends_on = [\"d\"]"),
            helper("d", "depends_on = [\"c\"]"),
        ))
        .unwrap_err();
        let shown = e.to_string();
        assert_eq!(e.len(), 2, "{e}");
        assert!(
            shown.contains("a -> b -> a") && shown.contains("c -> d -> c"),
            "{e}"
        );
        parse(&format!(
            "{}{}{}{}",
            helper("a", ""),
            helper("b", "depends_on = [\"a\"]"),
            helper("c", "depends_on = [\"a\"]"),
            helper("d", "depends_on = { b = \"started\", c = \"ready\" }"),
        ))
        .unwrap();
    }
}
