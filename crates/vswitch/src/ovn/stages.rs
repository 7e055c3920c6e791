//! The names of the logical pipelines' stages (`ls_in_acl`, `lr_in_ip_routing`), read
//! from one flow of each table instead of monitored with every flow.
//!
//! ovn-northd names a flow's stage in `Logical_Flow.external_ids:stage-name`. Like
//! ovn-controller, which omits `Logical_Flow.external_ids` from its monitor
//! (`ovsdb_idl_omit` in `ovn-controller.c`), the chassis does not monitor that column:
//! at 40,000 ports it was a fifth of the bytes ovsdb-server composed and sent for the
//! local flows on a full sync, and 16 MiB of the chassis' heap. A stage's name depends
//! only on its datapath's kind (switch or router), its pipeline and its table, so the
//! chassis reads `external_ids` of one flow per table it has flows in (`select` by
//! `_uuid`, one transaction, RFC 7047 §5.2.2), and again for every table when
//! ovn-northd's version (`SB_Global.options:northd_internal_version`) changes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ovsdb::{Client, Condition, Operation, OperationResult, Uuid};

use super::rows::Sb;
use super::sb::LogicalFlow;

/// The stages where ACLs live (OVN 23.03; `ls_in_acl_eval` from 23.09).
pub const ACL_STAGES: [&str; 4] = [
    "ls_in_acl",
    "ls_out_acl",
    "ls_in_acl_after_lb",
    "ls_in_acl_eval",
];

/// A table of a datapath kind's pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StageKey {
    /// A logical router's (`Datapath_Binding.external_ids:logical-router`), else a
    /// logical switch's.
    pub router: bool,
    /// The egress pipeline's, else the ingress one's.
    pub egress: bool,
    /// The table (`Logical_Flow.table_id`).
    pub table: u8,
}

impl StageKey {
    /// Flow `f`'s table on a datapath of kind `router`; `None` when its pipeline or
    /// table is out of range (such a flow is skipped when built).
    pub fn of(router: bool, f: &LogicalFlow) -> Option<StageKey> {
        let pipeline = super::pipeline::tables::pipeline_of(f.pipeline())?;
        let table = u8::try_from(f.table_id()).ok()?;
        Some(StageKey::at(router, pipeline, table))
    }

    /// Table `table` of pipeline `pipeline` on a datapath of kind `router`.
    pub fn at(router: bool, pipeline: ovn_lflow::actions::Pipeline, table: u8) -> StageKey {
        StageKey {
            router,
            egress: pipeline == ovn_lflow::actions::Pipeline::Egress,
            table,
        }
    }
}

/// The stage names known, by table.
#[derive(Clone, Debug, Default)]
pub struct StageNames {
    names: HashMap<StageKey, Arc<str>>,
    /// The `northd_internal_version` they were read under.
    version: Option<String>,
    /// Moves whenever a name is learned or forgotten: tables built under another
    /// generation carry other names (and maybe another answer to "has ACLs").
    generation: u64,
}

impl StageNames {
    /// The name of table `key`: `""` when not known (or the flow read had none).
    pub fn name(&self, key: StageKey) -> &str {
        self.names.get(&key).map_or("", |n| n)
    }

    /// Whether table `key`'s name is known.
    pub fn knows(&self, key: StageKey) -> bool {
        self.names.contains_key(&key)
    }

    /// Counts the changes of the names.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Names table `key` `name` (tests and tools that build rows by hand).
    pub fn insert(&mut self, key: StageKey, name: &str) {
        if self.names.get(&key).map(|n| &**n) != Some(name) {
            self.names.insert(key, Arc::from(name));
            self.generation += 1;
        }
    }

    /// Forgets every name when ovn-northd's version is no longer the one they were
    /// read under (another version numbers its stages otherwise).
    pub fn follow_version(&mut self, version: Option<&str>) {
        if self.version.as_deref() != version {
            self.version = version.map(str::to_owned);
            if !self.names.is_empty() {
                self.names.clear();
                self.generation += 1;
            }
        }
    }

    /// One flow of each table of `datapaths` whose name is not known, by table.
    pub fn unnamed(&self, sb: &Sb, datapaths: &[Uuid]) -> BTreeMap<StageKey, Uuid> {
        let mut out = BTreeMap::new();
        for dp in datapaths {
            let Some(row) = sb.datapaths.get(dp) else {
                continue;
            };
            let router = row.external_ids.contains_key("logical-router");
            for (u, f) in sb.flows_of(dp) {
                if let Some(key) = StageKey::of(router, f) {
                    if !self.knows(key) {
                        out.entry(key).or_insert(u);
                    }
                }
            }
        }
        out
    }

    /// Notes the names the `select`s of [`select_ops`] for `unnamed` returned. A flow
    /// without `stage-name` names its table `""`; one gone meanwhile leaves it unknown
    /// (asked again on the next pass that has flows there).
    fn learn(&mut self, unnamed: &BTreeMap<StageKey, Uuid>, results: &[OperationResult]) {
        for (key, result) in unnamed.keys().zip(results) {
            let OperationResult::Rows(rows) = result else {
                continue;
            };
            let Some(row) = rows.first() else { continue };
            let ids: BTreeMap<String, String> = row.get("external_ids").unwrap_or_default();
            self.insert(*key, ids.get("stage-name").map_or("", String::as_str));
        }
    }
}

/// Whether flow `f` of stage `stage` filters or marks packets: an ACL stage's flow
/// that does more than `next;`. ovn-northd ends every ACL stage with a flow matching
/// all packets (`build_acls`), so a stage whose flows all say `next;` passes every
/// packet unchanged: on a switch without ACLs or load balancers it holds `1` at
/// priority 65535 and the neighbour discovery and MLD bypass at 65532, all `next;`.
/// A switch with a filtering flow runs its logical pipeline.
pub fn filters(stage: &str, f: &LogicalFlow) -> bool {
    ACL_STAGES.contains(&stage) && f.actions().trim() != "next;"
}

/// The `select`s reading `external_ids` of each flow of `unnamed`, in its order.
fn select_ops(unnamed: &BTreeMap<StageKey, Uuid>) -> Vec<Operation> {
    unnamed
        .values()
        .map(|u| Operation::Select {
            table: "Logical_Flow".into(),
            conditions: vec![Condition::uuid(*u)],
            columns: Some(vec!["external_ids".into()]),
        })
        .collect()
}

/// Reads the names of the tables of `datapaths` that `sb` does not know yet (no round
/// trip when it knows them all). Only the flows of the datapaths in `changed` are
/// looked at, when given, unless ovn-northd's version changed: then every name is
/// forgotten and read again.
///
/// # Errors
/// The transaction failed (the caller's pass starts over).
pub async fn learn(
    client: &Client,
    sb: &mut Sb,
    datapaths: &[Uuid],
    changed: Option<&HashSet<Uuid>>,
) -> Result<(), String> {
    let version = sb.options.get("northd_internal_version").cloned();
    let before = sb.stages.generation();
    sb.stages.follow_version(version.as_deref());
    let look: Vec<Uuid> = match changed.filter(|_| sb.stages.generation() == before) {
        Some(c) => datapaths
            .iter()
            .filter(|d| c.contains(d))
            .copied()
            .collect(),
        None => datapaths.to_vec(),
    };
    let unnamed = sb.stages.unnamed(sb, &look);
    if unnamed.is_empty() {
        return Ok(());
    }
    let results = client
        .transact(select_ops(&unnamed))
        .await
        .map_err(|e| format!("reading the stage names of {} tables: {e}", unnamed.len()))?;
    sb.stages.learn(&unnamed, &results);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(m: &str, a: &str) -> LogicalFlow {
        LogicalFlow::new((None, None), "ingress", 8, 0, (m, a))
    }

    /// An ACL stage's flow filters unless it only passes packets on; other stages' never.
    #[test]
    fn only_acl_stages_other_than_the_pass_through_filter() {
        assert!(!filters("ls_in_acl", &flow("1", "next;")));
        assert!(!filters(
            "ls_in_acl",
            &flow("nd || nd_ra || mldv2", "next;")
        ));
        assert!(filters("ls_in_acl", &flow("1", "drop;")));
        assert!(filters(
            "ls_out_acl",
            &flow("ip4 && tcp.dst == 22", "reg0[1] = 1; next;")
        ));
        assert!(filters(
            "ls_in_acl_after_lb",
            &flow("ip4", "ct_commit; next;")
        ));
        assert!(!filters("ls_in_l2_lkup", &flow("ip4", "drop;")));
        assert!(!filters("", &flow("ip4", "drop;")));
    }

    /// Names are forgotten when ovn-northd's version changes, and every change of
    /// them moves the generation.
    #[test]
    fn names_follow_northds_version() {
        let mut s = StageNames::default();
        let key = StageKey {
            router: false,
            egress: false,
            table: 8,
        };
        s.follow_version(Some("23.03.1"));
        let g0 = s.generation();
        s.insert(key, "ls_in_acl");
        assert_eq!(s.name(key), "ls_in_acl");
        assert!(s.generation() > g0);
        let g1 = s.generation();
        s.insert(key, "ls_in_acl");
        assert_eq!(s.generation(), g1, "the same name again changes nothing");
        s.follow_version(Some("23.03.1"));
        assert!(s.knows(key));
        s.follow_version(Some("23.09.0"));
        assert!(!s.knows(key));
        assert!(s.generation() > g1);
    }

    /// One flow per unnamed table of the datapaths asked for, with the datapath's
    /// kind; named tables and other datapaths are left out.
    #[test]
    fn one_flow_per_unnamed_table() {
        let (sw, lr) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut sb = Sb::default();
        for (u, router) in [(sw, false), (lr, true)] {
            let kind = if router {
                "logical-router"
            } else {
                "logical-switch"
            };
            sb.datapaths.insert(
                u,
                super::super::sb::DatapathBinding {
                    uuid: u,
                    tunnel_key: 1,
                    external_ids: [(kind.to_string(), "x".to_string())].into(),
                },
            );
        }
        let add = |sb: &mut Sb, n: u128, dp: Uuid, pipeline: &str, table: i64| {
            let f = LogicalFlow::new((Some(dp), None), pipeline, table, 0, ("1", "next;"));
            sb.lflows.insert(Uuid::from_u128(n), f);
        };
        add(&mut sb, 10, sw, "ingress", 3);
        add(&mut sb, 11, sw, "ingress", 3);
        add(&mut sb, 12, sw, "egress", 3);
        add(&mut sb, 13, sw, "ingress", 4);
        add(&mut sb, 20, lr, "ingress", 3);
        let key = |router, egress, table| StageKey {
            router,
            egress,
            table,
        };
        let mut names = StageNames::default();
        names.insert(key(false, false, 4), "ls_in_pre_acl");
        let u = names.unnamed(&sb, &[sw]);
        let keys: Vec<StageKey> = u.keys().copied().collect();
        assert_eq!(keys, [key(false, false, 3), key(false, true, 3)]);
        assert!([10, 11]
            .map(Uuid::from_u128)
            .contains(&u[&key(false, false, 3)]));
        let u = names.unnamed(&sb, &[lr]);
        assert_eq!(
            u.into_iter().collect::<Vec<_>>(),
            [(key(true, false, 3), Uuid::from_u128(20))]
        );
    }
}
