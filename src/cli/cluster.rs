//! `rankstream cluster init` and `rankstream cluster status`.

use std::time::Duration;

use anyhow::Context as _;
use rankstream::api::Peers;
use rankstream::config::Config;
use rankstream::stream::admin::{cluster_topics, create_topics, partition_lags, TopicOutcome};
use rankstream::topology::{ShardId, Topology};
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
    Ok(())
}

async fn status(args: &ClusterArgs, key: Option<&str>, as_json: bool) -> anyhow::Result<()> {
    let (config, topology) = load(args)?;
    let peers = Peers::new(config.node.connect_timeout_ms);
    let mut nodes = Vec::new();
    for node in &topology.nodes {
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
            "forwarded": cluster["forwarded"],
            "forward_failures": cluster["forward_failures"],
            "replication": cluster["replication"],
            "kafka": stats.as_ref().map_or(Value::Null, |stats| stats["kafka"].clone()),
        }));
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
    let report =
        json!({ "shards": topology.shards, "brokers": config.kafka.brokers, "nodes": nodes, "shard_lag": shards });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "cluster: {} shards on {} nodes; brokers {}",
        topology.shards,
        topology.nodes.len(),
        config.kafka.brokers
    );
    println!(
        "{:10} {:22} {:6} {:12} {:>10} {:>9} {:>16}",
        "node", "http", "health", "shards", "forwarded", "failures", "replication_lag"
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
        println!(
            "{:10} {:22} {:6} {:12} {:>10} {:>9} {:>16}",
            text(&node["id"]),
            text(&node["http"]),
            text(&node["health"]),
            text(&node["shards"]),
            text(&node["forwarded"]),
            text(&node["forward_failures"]),
            lag
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
