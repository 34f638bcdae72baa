//! `POST /embed` and ingest-time item embeddings, on both embedders: the built-in
//! hashed one and the real all-MiniLM-L6-v2 model fetched by `tools/setup.sh`
//! (these tests fail, never skip, when it is missing).

use std::io::{BufRead, BufReader, Cursor, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use crate::common::*;
use base64::Engine as _;
use image::{ImageFormat, Rgb, RgbImage};

const EMBED: &str = "/embed";
const DIMENSIONS: usize = 384;

/// The two embedders under test: (expected model name, extra environment).
fn embedders() -> Vec<(&'static str, Vec<(String, String)>)> {
    vec![
        ("rankstream-hashed-384", vec![]),
        (
            "all-MiniLM-L6-v2",
            vec![("RANKSTREAM__EMBED__MODEL_DIR".to_owned(), minilm_dir())],
        ),
    ]
}

fn start(base: &[(String, String)], extra: &[(&str, &str)]) -> TestServer {
    let mut env: Vec<(&str, &str)> = base.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.extend_from_slice(extra);
    TestServer::start_with_env(&env)
}

fn floats(value: &Value, context: &str) -> Vec<f32> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{context}: not an array: {value}"))
        .iter()
        .map(|x| x.as_f64().unwrap_or_else(|| panic!("{context}: not a number: {x}")) as f32)
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

fn embed_text(server: &TestServer, key: &str, text: &str) -> Vec<f32> {
    let reply = server.post(EMBED, key, json!({ "text": text }));
    floats(&assert_status(&reply, 200, text)["embedding"], text)
}

/// A PNG of `width × height` whose pixels come from `pixel(x, y)`.
fn png(width: u32, height: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
    let image = RgbImage::from_fn(width, height, |x, y| Rgb(pixel(x, y)));
    let mut bytes = Cursor::new(Vec::new());
    image.write_to(&mut bytes, ImageFormat::Png).expect("encode png");
    bytes.into_inner()
}

/// An all-black image of `width × height` in `format`: a few hundred KB that decode to
/// hundreds of MB.
fn bomb(width: u32, height: u32, format: ImageFormat) -> Vec<u8> {
    let mut bytes = Cursor::new(Vec::new());
    match format {
        ImageFormat::Png | ImageFormat::Jpeg => image::GrayImage::new(width, height).write_to(&mut bytes, format),
        _ => image::RgbaImage::new(width, height).write_to(&mut bytes, format),
    }
    .expect("encode the bomb");
    bytes.into_inner()
}

/// A warm left-to-right gradient; `shift` changes it a little.
fn sunset(width: u32, height: u32, shift: u8) -> Vec<u8> {
    png(width, height, |x, y| {
        [
            230 - shift,
            (x * 255 / width) as u8 / 2 + shift,
            (y * 40 / height) as u8,
        ]
    })
}

/// A blue and green checkerboard: nothing like a sunset.
fn checkerboard(width: u32, height: u32) -> Vec<u8> {
    png(width, height, |x, y| {
        if (x / 6 + y / 6) % 2 == 0 {
            [20, 40, 220]
        } else {
            [30, 200, 60]
        }
    })
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn embed_image(server: &TestServer, key: &str, image: &[u8]) -> Vec<f32> {
    let reply = server.post(EMBED, key, json!({ "text": "a picture", "image_bytes": base64(image) }));
    let body = assert_status(&reply, 200, "image_bytes");
    floats(&body["image_embedding"], "image_embedding")
}

#[test]
fn both_embedders_give_384_dimensions_related_closer_and_deterministic() {
    for (model, env) in embedders() {
        let server = start(&env, &[]);
        let key = server.create_key(&["embed"], json!({"name": "embedder"}));
        let reply = server.post(EMBED, &key, json!({"text": "That is a happy person"}));
        let body = assert_status(&reply, 200, model);
        assert_eq!(body["model"], model, "{body}");
        assert_eq!(body["dimensions"], DIMENSIONS, "{model}");
        assert!(
            body.get("image_embedding").is_none(),
            "{model}: no image, no image vector"
        );
        let base = floats(&body["embedding"], model);
        assert_eq!(base.len(), DIMENSIONS, "{model}");
        let norm: f32 = base.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "{model}: unit length, got {norm}");

        let again = embed_text(&server, &key, "That is a happy person");
        assert_eq!(again, base, "{model}: the same text gives the same vector");
        // The route is served under /v1 as well.
        let v1 = server.post("/v1/embed", &key, json!({"text": "That is a happy person"}));
        assert_eq!(floats(&assert_status(&v1, 200, "/v1/embed")["embedding"], model), base);

        let very = cosine(&base, &embed_text(&server, &key, "That is a very happy person"));
        let dog = cosine(&base, &embed_text(&server, &key, "That is a happy dog"));
        let sunny = cosine(&base, &embed_text(&server, &key, "Today is a sunny day"));
        assert!(very > dog && dog > sunny, "{model}: {very} > {dog} > {sunny}");
        let film = embed_text(&server, &key, "an animated film about toys that come to life");
        let related = cosine(&film, &embed_text(&server, &key, "animated toys film for children"));
        let unrelated = cosine(&film, &embed_text(&server, &key, "quarterly tax return deadline"));
        assert!(
            related > unrelated + 0.2,
            "{model}: related {related}, unrelated {unrelated}"
        );

        if model == "all-MiniLM-L6-v2" {
            // sentence-transformers' reference values for this model (FACTS.md).
            for (cos, expected) in [(very, 0.943), (dog, 0.695), (sunny, 0.257)] {
                assert!(
                    (cos - expected).abs() < 0.01,
                    "MiniLM cosine {cos}, reference {expected}"
                );
            }
        }
    }
}

#[test]
fn both_embedders_embed_images_in_the_same_dimensionality() {
    for (model, env) in embedders() {
        let server = start(&env, &[]);
        let key = server.create_key(&["embed"], json!({"name": "embedder"}));
        let sunset_vector = embed_image(&server, &key, &sunset(64, 48, 0));
        assert_eq!(sunset_vector.len(), DIMENSIONS, "{model}");
        let similar = cosine(&sunset_vector, &embed_image(&server, &key, &sunset(90, 60, 12)));
        let different = cosine(&sunset_vector, &embed_image(&server, &key, &checkerboard(64, 48)));
        assert!(
            similar > different + 0.3,
            "{model}: similar images {similar}, different {different}"
        );
        assert_eq!(
            embed_image(&server, &key, &sunset(64, 48, 0)),
            sunset_vector,
            "{model}: deterministic"
        );
        // A data URL and unpadded base64 are accepted too.
        let unpadded = base64(&sunset(64, 48, 0)).trim_end_matches('=').to_owned();
        let data_url = format!("data:image/png;base64,{}", base64(&sunset(64, 48, 0)));
        for encoded in [unpadded, data_url] {
            let reply = server.post(EMBED, &key, json!({"text": "x", "image_bytes": encoded}));
            let body = assert_status(&reply, 200, "image variants");
            assert_eq!(floats(&body["image_embedding"], model), sunset_vector);
        }
    }
}

#[test]
fn every_invalid_input_gets_its_status_on_both_embedders() {
    for (model, env) in embedders() {
        let server = start(&env, &[("RANKSTREAM__EMBED__IMAGE_MAX_BYTES", "50000")]);
        let key = server.create_key(&["embed"], json!({"name": "embedder"}));
        let image = base64(&sunset(16, 16, 0));
        let too_big = base64(&vec![0u8; 60_000]);
        let long_text = "word ".repeat(4000);
        let cases = [
            (json!({}), "missing text"),
            (json!({"text": null}), "null text"),
            (json!({"text": ""}), "empty text"),
            (json!({"text": "   "}), "blank text"),
            (json!({"text": 42}), "text of the wrong type"),
            (json!({"text": ["a"]}), "text as an array"),
            (json!({"text": long_text}), "text above max_text_bytes"),
            (json!({"text": "a", "image_bytes": 7}), "image_bytes of the wrong type"),
            (json!({"text": "a", "image_bytes": "%%% not base64 %%%"}), "bad base64"),
            (
                json!({"text": "a", "image_bytes": base64(b"just some text, not an image")}),
                "non-image bytes",
            ),
            (
                json!({"text": "a", "image_bytes": base64(b"\x89PNG\r\n\x1a\ntruncated")}),
                "broken png",
            ),
            (json!({"text": "a", "image_bytes": ""}), "empty image_bytes"),
            (
                json!({"text": "a", "image_bytes": too_big}),
                "image above image_max_bytes",
            ),
            (
                json!({"text": "a", "image_url": "http://127.0.0.1:9/a.png"}),
                "image_url while fetching is off",
            ),
            (json!({"text": "a", "image_url": 5}), "image_url of the wrong type"),
            (
                json!({"text": "a", "image_bytes": image, "image_url": "http://x/a.png"}),
                "both image fields",
            ),
            (json!(["text"]), "an array body"),
        ];
        for (body, case) in cases {
            let context = format!("{model}: {case}");
            let message = assert_error(&server.post(EMBED, &key, body), 422, "validation_error", &context);
            if case == "image_url while fetching is off" {
                assert!(message.contains("image_url_fetch"), "{context}: {message}");
            }
        }
        let reply = server.raw(Method::POST, EMBED, &key, b"{\"text\": ", "application/json");
        assert_error(&reply, 400, "malformed_json", &format!("{model}: malformed JSON"));

        let no_key = server.send(
            Method::POST,
            EMBED,
            Auth::None,
            Payload::Json(json!({"text": "a"})),
            &[],
        );
        assert_error(&no_key.pair(), 401, "unauthorized", "no key");
        let wrong_scope = server.create_key(&["recommend"], json!({"name": "ranker"}));
        let reply = server.post(EMBED, &wrong_scope, json!({"text": "a"}));
        assert_error(&reply, 403, "forbidden", "recommend-only key");
        let reply = server.get(EMBED, &key);
        assert_eq!(reply.0, 405, "{model}: GET /embed");
    }
}

/// Images that declare far more pixels than their bytes suggest are refused from their
/// header, before memory is taken for the pixels: 422 `image_too_large`, and the node
/// keeps serving with its memory where it was.
#[test]
fn image_bombs_are_refused_before_decoding() {
    let server = TestServer::start();
    let key = server.create_key(&["embed"], json!({"name": "embedder"}));
    let bombs = [
        ("png 16000 × 16000", bomb(16_000, 16_000, ImageFormat::Png)),
        ("jpeg 5000 × 5000", bomb(5_000, 5_000, ImageFormat::Jpeg)),
        ("gif 5000 × 5000", bomb(5_000, 5_000, ImageFormat::Gif)),
        ("webp 5000 × 5000", bomb(5_000, 5_000, ImageFormat::WebP)),
    ];
    let rss_before = server.rss_kib();
    for (name, bytes) in &bombs {
        let reply = server.post(EMBED, &key, json!({"text": "a", "image_bytes": base64(bytes)}));
        let message = assert_error(&reply, 422, "image_too_large", name);
        assert!(message.contains("pixels"), "{name}: {message}");
    }
    let grown_mib = server.rss_kib().saturating_sub(rss_before) / 1024;
    assert!(grown_mib < 100, "the node grew by {grown_mib} MiB decoding nothing");
    let fine = embed_image(&server, &key, &sunset(640, 480, 0));
    assert_eq!(fine.len(), DIMENSIONS, "ordinary images still embed");
}

#[test]
fn items_without_embeddings_get_one_from_their_text_at_ingest() {
    for (model, env) in embedders() {
        let server = start(&env, &[("RANKSTREAM__EMBED__EMBED_ITEMS_AT_INGEST", "true")]);
        let key = server.create_key(&["embed", "catalog:read", "catalog:write"], json!({"name": "catalog"}));
        let item = json!({"id": "toy-story", "_table": "films", "name": "Toy Story (1995)",
                          "groups": ["Animation", "Children", "Comedy"], "price": 3});
        assert_status(&server.put(ITEM, &key, item), 200, "single upsert");
        let stored = server.get(&item_path("films", "toy-story"), &key);
        let stored = assert_status(&stored, 200, "get item");
        let vector = floats(&stored["embeddings"], &format!("{model}: stored embeddings"));
        assert_eq!(vector.len(), DIMENSIONS, "{model}");
        let expected = embed_text(&server, &key, "Toy Story (1995). Animation, Children, Comedy");
        let same = cosine(&vector, &expected);
        assert!(same > 0.9999, "{model}: the stored vector is the text's ({same})");

        // A vector of its own has the table's length (every embedding of a field has).
        let mut own_vector = vec![0.0; DIMENSIONS];
        own_vector[0] = 1.0;
        let bulk = json!([
            {"id": "heat", "_table": "films", "name": "Heat (1995)", "groups": ["Action", "Crime", "Thriller"]},
            {"id": "own", "_table": "films", "name": "Own vector", "embeddings": own_vector},
            {"id": "textless", "_table": "films", "price": 5},
        ]);
        let reply = server.put(ITEMS, &key, bulk);
        let body = assert_status(&reply, 200, "bulk upsert");
        assert_eq!(body["upserted"], 3, "{body}");
        let heat = server.get(&item_path("films", "heat"), &key);
        let heat = floats(&assert_status(&heat, 200, "heat")["embeddings"], "heat");
        assert_eq!(heat.len(), DIMENSIONS);
        assert!(
            cosine(&heat, &vector) < 0.99,
            "{model}: different films, different vectors"
        );
        let own = server.get(&item_path("films", "own"), &key);
        assert_eq!(
            assert_status(&own, 200, "own")["embeddings"],
            json!(own_vector),
            "kept as sent"
        );
        let textless = server.get(&item_path("films", "textless"), &key);
        assert!(assert_status(&textless, 200, "textless").get("embeddings").is_none());
    }
}

#[test]
fn items_keep_no_embeddings_when_ingest_embedding_is_off() {
    let server = TestServer::start();
    let key = server.create_key(&["catalog:read", "catalog:write"], json!({"name": "catalog"}));
    let item = json!({"id": "a", "_table": "films", "name": "Jumanji (1995)"});
    assert_status(&server.put(ITEM, &key, item), 200, "upsert");
    let stored = server.get(&item_path("films", "a"), &key);
    assert!(assert_status(&stored, 200, "get").get("embeddings").is_none());
}

/// A one-thread HTTP/1.1 server on 127.0.0.1 for `image_url` tests: `/image.png`,
/// `/missing` (404), `/big` (over the limit), `/slow` (past the deadline),
/// `/redirect-home` (to `/image.png`) and `/redirect-away` (to `localhost`).
fn image_host(image: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind image host");
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let image = image.clone();
            thread::spawn(move || serve_image(stream, &image, port));
        }
    });
    port
}

fn serve_image(mut stream: TcpStream, image: &[u8], port: u16) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (status, headers, body): (&str, String, Vec<u8>) = match path.as_str() {
        "/image.png" => ("200 OK", "Content-Type: image/png\r\n".into(), image.to_vec()),
        "/big" => ("200 OK", String::new(), vec![7u8; 200_000]),
        "/slow" => {
            thread::sleep(Duration::from_secs(3));
            ("200 OK", String::new(), image.to_vec())
        }
        "/redirect-home" => ("302 Found", "Location: /image.png\r\n".into(), Vec::new()),
        "/redirect-away" => (
            "302 Found",
            format!("Location: http://localhost:{port}/image.png\r\n"),
            Vec::new(),
        ),
        _ => ("404 Not Found", String::new(), b"no such image".to_vec()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}

#[test]
fn image_url_is_fetched_only_from_allowed_hosts_when_enabled() {
    let image = sunset(40, 30, 0);
    let port = image_host(image.clone());
    let server = TestServer::start_with_env(&[
        ("RANKSTREAM__EMBED__IMAGE_URL_FETCH", "true"),
        ("RANKSTREAM__EMBED__IMAGE_URL_ALLOW_HOSTS", "[\"127.0.0.1\"]"),
        ("RANKSTREAM__EMBED__IMAGE_MAX_BYTES", "100000"),
        ("RANKSTREAM__EMBED__IMAGE_FETCH_TIMEOUT_MS", "1000"),
    ]);
    let key = server.create_key(&["embed"], json!({"name": "embedder"}));
    let expected = embed_image(&server, &key, &image);
    for path in ["/image.png", "/redirect-home"] {
        let url = format!("http://127.0.0.1:{port}{path}");
        let reply = server.post(EMBED, &key, json!({"text": "a picture", "image_url": url}));
        let body = assert_status(&reply, 200, path);
        assert_eq!(
            floats(&body["image_embedding"], path),
            expected,
            "{path}: same image, same vector"
        );
    }
    let refused = [
        (
            format!("http://localhost:{port}/image.png"),
            "a host not on the allow-list",
        ),
        (
            format!("http://127.0.0.1:{port}/redirect-away"),
            "a redirect to another host",
        ),
        (format!("http://127.0.0.1:{port}/missing"), "a 404"),
        (format!("http://127.0.0.1:{port}/big"), "a body above image_max_bytes"),
        (format!("http://127.0.0.1:{port}/slow"), "a fetch past the deadline"),
        (format!("https://127.0.0.1:{port}/image.png"), "https"),
        ("file:///etc/passwd".to_owned(), "a file URL"),
        ("not a url".to_owned(), "not a URL"),
    ];
    for (url, case) in refused {
        let reply = server.post(EMBED, &key, json!({"text": "a", "image_url": url}));
        assert_error(&reply, 422, "validation_error", case);
    }
}

#[test]
fn a_model_directory_that_cannot_load_stops_the_node_at_start() {
    let empty = tempfile::tempdir().expect("temp dir");
    let data = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_rankstream"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .env("RANKSTREAM__EMBED__MODEL_DIR", empty.path())
        .stdin(Stdio::null())
        .output()
        .expect("run rankstream");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the node must not start: {stderr}");
    assert!(
        stderr.contains("config.json") && stderr.contains("embed.model_dir"),
        "the error names the missing file and the key: {stderr}"
    );
}

/// The default (`embed.model_dir = "auto"`): the real model where set-up puts it,
/// without any setting; the hashed embedder, with a warning, where it is not.
#[test]
fn by_default_the_node_embeds_with_the_model_set_up_put_in_place() {
    // TestServer pins the hashed embedder for the other tests; "auto" is the compiled default.
    assert!(rankstream::config::DEFAULT_TOML.contains("model_dir = \"auto\""));
    let models = std::path::Path::new(&minilm_dir())
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let server =
        TestServer::start_with_env(&[("RANKSTREAM__EMBED__MODEL_DIR", "auto"), ("RANKSTREAM_MODELS", &models)]);
    let key = server.create_key(&["embed"], json!({"name": "embedder"}));
    let reply = server.post(EMBED, &key, json!({"text": "a harbour cruise at sunset"}));
    assert_eq!(assert_status(&reply, 200, "embed")["model"], "all-MiniLM-L6-v2");

    let nowhere = tempfile::tempdir().expect("temp dir");
    let mut server = TestServer::start_with_env(&[
        ("RANKSTREAM__EMBED__MODEL_DIR", "auto"),
        ("RANKSTREAM_MODELS", nowhere.path().to_str().unwrap()),
    ]);
    let key = server.create_key(&["embed"], json!({"name": "embedder"}));
    let reply = server.post(EMBED, &key, json!({"text": "a harbour cruise at sunset"}));
    assert_eq!(assert_status(&reply, 200, "embed")["model"], "rankstream-hashed-384");
    server.stop();
    assert!(
        server.output().contains("the MiniLM model is not where set-up puts it"),
        "a warning at start-up: {}",
        server.output()
    );
}
