//! Cluster test support: a tansu broker, a topology of nodes on 127.0.0.1 whose
//! topics `rankstream cluster init` made, and the nodes as servers.
#![allow(dead_code)]

use std::process::Command;

use super::kafka::Broker;
use crate::common::{owned_port, TestServer};
use rankstream::topology::{shard_for, Topology};

pub const SHARDS: u16 = 24;

/// The broker, the nodes' addresses, the current topology and the running nodes.
pub struct Cluster {
    pub broker: Broker,
    /// Every node's id and port, in the order they were first named.
    ports: Vec<(String, u16)>,
    pub topology: Topology,
    pub topology_file: tempfile::NamedTempFile,
    pub config_file: tempfile::NamedTempFile,
    /// Running nodes, in the order of `ports`.
    pub nodes: Vec<TestServer>,
    pub admin_key: String,
}

impl Cluster {
    /// `layout`: each node's id and shard ranges, e.g. `[("a", "0-7"), ...]`.
    pub fn start(layout: &[(&str, &str)]) -> Cluster {
        let broker = Broker::start_empty();
        let config_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(config_file.path(), broker.server_config()).unwrap();
        let mut cluster = Cluster {
            broker,
            ports: Vec::new(),
            topology: Topology::parse("shards = 1\n[[node]]\nid = \"x\"\nhttp = \"127.0.0.1:1\"\nshards = \"0\"\n")
                .unwrap(),
            topology_file: tempfile::NamedTempFile::new().unwrap(),
            config_file,
            nodes: Vec::new(),
            admin_key: format!("cluster-admin-{}", std::process::id()),
        };
        let text = cluster.topology_text(layout);
        cluster.topology = Topology::parse(&text).expect("a valid topology");
        std::fs::write(cluster.topology_file.path(), &text).unwrap();
        let init = cluster.cli(&["init"], cluster.topology_file.path());
        assert!(
            init.contains("rankstream-catalog") && init.contains("compact"),
            "{init}"
        );
        let again = cluster.cli(&["init"], cluster.topology_file.path());
        assert!(!again.contains("created"), "init is idempotent: {again}");
        for (id, _) in layout {
            let node = cluster.start_node(id, cluster.topology_file.path());
            cluster.nodes.push(node);
        }
        cluster
    }

    /// The text of a topology of `layout`; a node named for the first time gets a port.
    pub fn topology_text(&mut self, layout: &[(&str, &str)]) -> String {
        let mut text = format!("shards = {SHARDS}\n");
        for (id, shards) in layout {
            let port = match self.ports.iter().find(|(known, _)| known == id) {
                Some((_, port)) => *port,
                None => {
                    // A node may be killed and restarted on its port: the test owns it.
                    let port = owned_port();
                    self.ports.push((id.to_string(), port));
                    port
                }
            };
            text.push_str(&format!(
                "[[node]]\nid = \"{id}\"\nhttp = \"127.0.0.1:{port}\"\nshards = \"{shards}\"\n"
            ));
        }
        text
    }

    /// Runs `rankstream cluster ACTION --brokers ... --topology FILE`; its stdout.
    pub fn cli(&self, action: &[&str], topology: &std::path::Path) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_rankstream"))
            .arg("cluster")
            .args(action)
            .args(["--brokers", &self.broker.bootstrap(), "--topology"])
            .arg(topology)
            .env("RANKSTREAM_ADMIN_KEY", &self.admin_key)
            .output()
            .expect("run rankstream cluster");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "cluster {action:?}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    /// Starts node `id` with `topology` (which must name it).
    pub fn start_node(&self, id: &str, topology: &std::path::Path) -> TestServer {
        let port = self
            .ports
            .iter()
            .find(|(known, _)| known == id)
            .expect("a named node")
            .1;
        let bind = format!("127.0.0.1:{port}");
        let args = [
            "--config",
            self.config_file.path().to_str().unwrap(),
            "--topology",
            topology.to_str().unwrap(),
            "--node-id",
            id,
            "--bind",
            &bind,
        ];
        // Tests read thousands of states in seconds with one key, and a forwarded
        // request counts against the key on both nodes.
        let env = [
            ("RANKSTREAM_ADMIN_KEY", self.admin_key.as_str()),
            ("RANKSTREAM__AUTH__DEFAULT_RATE_PER_SEC", "1000000"),
            ("RANKSTREAM__AUTH__DEFAULT_BURST", "1000000"),
        ];
        let mut server = TestServer::start_with(&env, &args);
        server.admin_key = self.admin_key.clone();
        server
    }

    /// Deletes the data directory of node `index`, which must not be running: restarted
    /// (`nodes[index].restart()`), it comes back with its id and port on an empty one.
    pub fn wipe_data(&self, index: usize) {
        let node = &self.nodes[index];
        assert!(!node.is_running(), "stop or kill node {index} before deleting its data");
        match std::fs::remove_dir_all(node.data_path()) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => panic!("delete {}: {error}", node.data_path().display()),
        }
    }

    /// The index (in `nodes`) of the node owning `key`'s shard in the current topology.
    pub fn owner(&self, key: &str) -> usize {
        let owner = &self.topology.nodes[self.topology.owner_of(shard_for(key.as_bytes(), SHARDS))].id;
        self.ports.iter().position(|(id, _)| id == owner).expect("a known node")
    }
}
