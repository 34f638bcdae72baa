//! `rankstream cluster init`, `rankstream cluster apply` and `rankstream cluster status`.

use std::time::Duration;

use anyhow::Context as _;
use rankstream::api::Peers;
use rankstream::config::Config;
use rankstream::stream::cluster::topology_log::{self, Applied};
use rankstream::stream::topics::{cluster_topics, create_topics, partition_lags, TopicOutcome};
use rankstream::topology::{Node, ShardId, Topology};
use serde_json::{json, Value};

use crate::{ClusterAction, ClusterArgs};

/// How long a node may take to answer the status probes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

pub async fn run(action: ClusterAction) -> anyhow::Result<()> {
    match action {
        ClusterAction::Init {
            args,
            replication_factor,
        } => init(&args, replication_factor).await,
        ClusterAction::Apply { args } => apply(&args).await,
        ClusterAction::Status { args, key, json } => {
            let key = key.or_else(|| std::env::var("RANKSTREAM_ADMIN_KEY").ok());
            status(&args, key.as_deref(), json).await
        }
    }
}

/// The configuration (with `--brokers`) and the topology the arguments name.
fn load(args: &ClusterArgs) -> anyhow::Result<(Config, Topology)> {
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(brokers) = &args.brokers {
        config.kafka.brokers = brokers.clone();
    }
    let text = std::fs::read_to_string(&args.topology)
        .with_context(|| format!("reading topology file {}", args.topology.display()))?;
    Ok((config, Topology::parse(&text)?))
}

async fn init(args: &ClusterArgs, replication: i32) -> anyhow::Result<()> {
    let (config, topology) = load(args)?;
    let topics = cluster_topics(&config.kafka, topology.shards);
    let outcomes = create_topics(&config.kafka, &topics, replication)
        .await
        .with_context(|| format!("creating the cluster's topics on {}", config.kafka.brokers))?;
    for spec in &topics {
        let outcome = outcomes
            .iter()
            .find(|(name, _)| *name == spec.name)
            .map_or("?", |(_, outcome)| match outcome {
                TopicOutcome::Created => "created",
                TopicOutcome::Existed => "exists",
            });
        let policy = if spec.compact { "compact" } else { "delete" };
        println!(
            "{outcome:8} {:32} partitions={:<4} cleanup.policy={policy}",
            spec.name, spec.partitions
        );
    }
    // The cluster's first topology is epoch 1; `apply` publishes the next ones.
    match topology_log::latest(&config.kafka)? {
        (Some(latest), _) => println!("topology: epoch {} already published", latest.epoch),
        (None, _) => {
            let first = Applied {
                epoch: 1,
                text: topology.text.clone(),
            };
            topology_log::publish(&config.kafka, &first).await?;
            println!("topology: epoch 1 published");
        }
    }
    Ok(())
}

/// Validates the topology file and publishes it with the next epoch.
async fn apply(args: &ClusterArgs) -> anyhow::Result<()> {
    let (config, topology) = load(args)?;
    let kafka = &config.kafka;
    let spec = cluster_topics(kafka, topology.shards)
        .into_iter()
        .filter(|spec| [&kafka.topology_topic, &kafka.changelog_topic, &kafka.membership_topic].contains(&&spec.name))
        .collect::<Vec<_>>();
    // A cluster made before topologies (or heartbeats) were published lacks their
    // topics; the changelog's partition count is the cluster's shard count.
    create_topics(kafka, &spec, 1)
        .await
        .with_context(|| format!("checking the cluster's topics on {}", kafka.brokers))?;
    let (latest, _) = topology_log::latest(kafka)?;
    if let Some(latest) = &latest {
        let current = Topology::parse(&latest.text)?;
        anyhow::ensure!(
            current.shards == topology.shards,
            "the cluster has {} shards; {} says {} (the shard count never changes)",
            current.shards,
            args.topology.display(),
            topology.shards
        );
    }
    let peers = Peers::new(config.node.connect_timeout_ms);
    let mut down = Vec::new();
    for node in &topology.nodes {
        if !matches!(
            peers.get_json(&node.http, "/healthz", None, PROBE_TIMEOUT).await,
            Some((200, _))
        ) {
            down.push(format!("{} ({})", node.id, node.http));
        }
    }
    anyhow::ensure!(
        down.is_empty(),
        "not applied: node(s) {} do not answer; start them (with --node-id) first",
        down.join(", ")
    );
    let epoch = latest.as_ref().map_or(0, |latest| latest.epoch) + 1;
    let applied = Applied {
        epoch,
        text: topology.text.clone(),
    };
    topology_log::publish(kafka, &applied)
        .await
        .with_context(|| format!("publishing the topology to {}", kafka.topology_topic))?;
    let moves: Vec<String> = match &latest {
        Some(latest) => {
            let before = Topology::parse(&latest.text)?;
            (0..topology.shards)
                .filter_map(|shard| {
                    let (from, to) = (
                        &before.nodes[before.owner_of(shard)].id,
                        &topology.nodes[topology.owner_of(shard)].id,
                    );
                    (from != to).then(|| format!("{shard}:{from}->{to}"))
                })
                .collect()
        }
        None => Vec::new(),
    };
    println!(
        "applied epoch {epoch}: {} nodes, {} shards",
        topology.nodes.len(),
        topology.shards
    );
    if !moves.is_empty() {
        println!("moves: {}", moves.join(" "));
    }
    Ok(())
}

/// The topology the cluster follows now: the latest published, else the file's.
fn current_topology(config: &Config, file: Topology) -> anyhow::Result<(u64, Topology)> {
    match topology_log::latest(&config.kafka)? {
        (Some(latest), _) => Ok((latest.epoch, Topology::parse(&latest.text)?)),
        (None, _) => Ok((0, file)),
    }
}

async fn status(args: &ClusterArgs, key: Option<&str>, as_json: bool) -> anyhow::Result<()> {
    let (config, file) = load(args)?;
    let (epoch, topology) = current_topology(&config, file.clone())?;
    // A node the current topology no longer names may still be handing shards off.
    let mut listed: Vec<Node> = topology.nodes.clone();
    for node in file.nodes {
        if !listed.iter().any(|known| known.id == node.id) {
            listed.push(Node {
                shards: Vec::new(),
                ..node
            });
        }
    }
    let peers = Peers::new(config.node.connect_timeout_ms);
    let mut nodes = Vec::new();
    for node in &listed {
        let health = peers.get_json(&node.http, "/healthz", None, PROBE_TIMEOUT).await;
        let stats = match (&health, key) {
            (Some((200, _)), Some(key)) => peers
                .get_json(&node.http, "/v1/admin/stats", Some(key), PROBE_TIMEOUT)
                .await
                .filter(|(status, _)| *status == 200)
                .map(|(_, stats)| stats),
            _ => None,
        };
        let cluster = stats
            .as_ref()
            .map(|stats| stats["cluster"].clone())
            .unwrap_or(Value::Null);
        nodes.push(json!({
            "id": node.id,
            "http": node.http,
            "health": if matches!(health, Some((200, _))) { "up" } else { "down" },
            "shards": ranges(&node.shards),
            "serving": cluster["local_shards"].as_array().map(|shards| {
                let shards: Vec<ShardId> = shards.iter().filter_map(Value::as_u64).map(|shard| shard as ShardId).collect();
                match shards.is_empty() {
                    true => "none".to_owned(),
                    false => ranges(&shards),
                }
            }),
            "epoch": cluster["epoch"],
            "moves": cluster["moves"],
            "forwarded": cluster["forwarded"],
            "forward_failures": cluster["forward_failures"],
            "replication": cluster["replication"],
            "kafka": stats.as_ref().map_or(Value::Null, |stats| stats["kafka"].clone()),
            "cluster_members": cluster["members"],
        }));
    }
    // The cluster's own verdict on each node, by heartbeats: the view of the first node
    // that answered its stats. A node is up when it answers and its heartbeats arrive.
    let members = nodes
        .iter()
        .find_map(|node| node["cluster_members"].as_array().cloned())
        .unwrap_or_default();
    for node in &mut nodes {
        let heard = members
            .iter()
            .find(|member| member["id"] == node["id"])
            .map_or(Value::Null, |member| member["health"].clone());
        if heard == "down" {
            node["health"] = json!("down");
        }
        node["heartbeat"] = heard;
        if let Some(object) = node.as_object_mut() {
            object.remove("cluster_members");
        }
    }
    let inputs: Vec<String> = config.kafka.inputs.iter().map(|input| input.topic.clone()).collect();
    let lags = partition_lags(&config.kafka, &inputs, i32::from(topology.shards))
        .with_context(|| format!("reading offsets from {}", config.kafka.brokers))?;
    let shards: Vec<Value> = (0..topology.shards)
        .map(|shard| {
            let topics: serde_json::Map<String, Value> = lags
                .iter()
                .filter(|lag| lag.partition == i32::from(shard))
                .map(|lag| (lag.topic.clone(), json!(lag.lag())))
                .collect();
            json!({
                "shard": shard,
                "owner": topology.nodes[topology.owner_of(shard)].id,
                "lag": topics.values().filter_map(Value::as_i64).sum::<i64>(),
                "lag_by_topic": topics,
            })
        })
        .collect();
    let moving: Vec<Value> = nodes
        .iter()
        .flat_map(|node| {
            let id = node["id"].clone();
            node["moves"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |mut step| {
                    step["node"] = id.clone();
                    step
                })
        })
        .collect();
    let report = json!({
        "epoch": epoch,
        "shards": topology.shards,
        "brokers": config.kafka.brokers,
        "nodes": nodes,
        "moves": moving,
        "shard_lag": shards,
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "cluster: epoch {epoch}, {} shards on {} nodes; brokers {}",
        topology.shards,
        topology.nodes.len(),
        config.kafka.brokers
    );
    match moving.is_empty() {
        true => println!("moves: none in progress"),
        false => {
            let steps: Vec<String> = moving
                .iter()
                .map(|step| {
                    format!(
                        "shard {} {} on {}",
                        step["shard"],
                        step["phase"].as_str().unwrap_or("?"),
                        step["node"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            println!("moves: {}", steps.join("; "));
        }
    }
    println!(
        "{:10} {:22} {:6} {:9} {:12} {:12} {:>10} {:>9} {:>16} {:>14}",
        "node",
        "http",
        "health",
        "heartbeat",
        "shards",
        "serving",
        "forwarded",
        "failures",
        "replication_lag",
        "catalog_log"
    );
    for node in &nodes {
        let text = |value: &Value| match value {
            Value::Null => "-".to_owned(),
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let lag = match &node["replication"]["lag_ms"] {
            Value::Null => "-".to_owned(),
            lag => format!("{lag} ms"),
        };
        // A node that joined with an empty data directory reads the catalog log first.
        let replication = &node["replication"];
        let catalog = match (&replication["caught_up"], &replication["position"]) {
            (Value::Bool(true), _) => "read".to_owned(),
            (Value::Bool(false), position) => format!("{position}/{}", replication["end_at_start"]),
            _ => "-".to_owned(),
        };
        println!(
            "{:10} {:22} {:6} {:9} {:12} {:12} {:>10} {:>9} {:>16} {:>14}",
            text(&node["id"]),
            text(&node["http"]),
            text(&node["health"]),
            text(&node["heartbeat"]),
            text(&node["shards"]),
            text(&node["serving"]),
            text(&node["forwarded"]),
            text(&node["forward_failures"]),
            lag,
            catalog
        );
    }
    println!("{:6} {:10} {:>8}  per topic", "shard", "owner", "lag");
    for shard in &shards {
        let per_topic: Vec<String> = shard["lag_by_topic"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(topic, lag)| format!("{topic}={lag}"))
            .collect();
        println!(
            "{:<6} {:10} {:>8}  {}",
            shard["shard"].as_u64().unwrap_or_default(),
            shard["owner"].as_str().unwrap_or("?"),
            shard["lag"].as_i64().unwrap_or_default(),
            per_topic.join(" ")
        );
    }
    Ok(())
}

/// `[0, 1, 2, 5]` → `"0-2,5"`.
fn ranges(shards: &[ShardId]) -> String {
    let mut sorted = shards.to_vec();
    sorted.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(ShardId, ShardId)> = None;
    for shard in sorted {
        run = match run {
            Some((first, last)) if shard == last + 1 => Some((first, shard)),
            Some((first, last)) => {
                parts.push(range_text(first, last));
                Some((shard, shard))
            }
            None => Some((shard, shard)),
        };
    }
    parts.extend(run.map(|(first, last)| range_text(first, last)));
    parts.join(",")
}

fn range_text(first: ShardId, last: ShardId) -> String {
    if first == last {
        first.to_string()
    } else {
        format!("{first}-{last}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shard_lists_print_as_ranges() {
        assert_eq!(super::ranges(&[5, 0, 1, 2, 7, 8]), "0-2,5,7-8");
        assert_eq!(super::ranges(&[]), "");
    }
}
