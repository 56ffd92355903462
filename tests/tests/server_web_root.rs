//! The static files under `--web-root`, served like a web app, against a real lock-server
//! process: scripts/precompress.mjs (what scripts/build-ui.sh runs on the dashboard's wasm
//! and JS) writes `.br` and `.gz` variants, and the server picks one by `Accept-Encoding`,
//! falls back to the file itself, says `Vary: Accept-Encoding` and `Cache-Control: no-cache`,
//! and answers a revalidation with 304. (The run stage checks the same on the built dashboard,
//! decompressing the variants: tests/browser/run-smoke.mjs.)

use std::path::Path;
use std::process::Command;

use lock_e2e::{ServerOptions, TestServer};
use reqwest::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, IF_MODIFIED_SINCE, LAST_MODIFIED, VARY,
};
use reqwest::StatusCode;

/// A temp dir holding `secret.txt` and the web root `www/`: a compressible `app.wasm` (and
/// its variants, made by the build's script) and a tiny `note.txt` that no compression makes
/// smaller.
struct WebRoot(tempfile::TempDir);

impl WebRoot {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("secret.txt"), b"secret").expect("write secret");
        let www = dir.path().join("www");
        std::fs::create_dir(&www).expect("www");
        let wasm: Vec<u8> = (0..200_000u32).map(|i| (i % 97) as u8).collect();
        std::fs::write(www.join("app.wasm"), &wasm).expect("write wasm");
        std::fs::write(www.join("note.txt"), b"x").expect("write note");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/precompress.mjs");
        let status = Command::new("node")
            .arg(script)
            .arg(www.join("app.wasm"))
            .arg(www.join("note.txt"))
            .status()
            .expect("node runs scripts/precompress.mjs");
        assert!(status.success(), "precompress.mjs failed: {status}");
        Self(dir)
    }

    fn path(&self) -> std::path::PathBuf {
        self.0.path().join("www")
    }
}

fn start(root: &Path) -> TestServer {
    TestServer::start(ServerOptions::new().args(["--web-root", root.to_str().expect("utf-8")]))
}

async fn get(
    server: &TestServer,
    path: &str,
    headers: &[(reqwest::header::HeaderName, &str)],
) -> reqwest::Response {
    let mut request = server.http(1).get(format!("{}{path}", server.base_url()));
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    request.send().await.expect("answer")
}

#[tokio::test]
async fn a_variant_is_chosen_by_accept_encoding_and_the_file_is_the_fallback() {
    let root = WebRoot::new();
    let server = start(&root.path());
    let file = |name: &str| std::fs::read(root.path().join(name)).expect("read");
    let br_file = file("app.wasm.br");
    assert!(
        br_file.len() < file("app.wasm").len() / 4,
        "the script wrote a real Brotli variant ({} bytes)",
        br_file.len()
    );

    let cases = [
        ("br, gzip", Some("br"), "app.wasm.br"),
        ("gzip, deflate", Some("gzip"), "app.wasm.gz"),
        ("identity", None, "app.wasm"),
        ("", None, "app.wasm"),
    ];
    for (accept, encoding, served) in cases {
        let answer = get(&server, "/app.wasm", &[(ACCEPT_ENCODING, accept)]).await;
        assert_eq!(answer.status(), StatusCode::OK, "{accept}");
        let header = |name| {
            answer
                .headers()
                .get(name)
                .map(|v| v.to_str().expect("ascii").to_owned())
        };
        assert_eq!(header(CONTENT_ENCODING).as_deref(), encoding, "{accept}");
        assert!(
            header(VARY).is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")),
            "{accept}: {:?}",
            header(VARY)
        );
        assert_eq!(header(CACHE_CONTROL).as_deref(), Some("no-cache"));
        assert_eq!(
            answer.bytes().await.expect("body"),
            file(served),
            "{accept}"
        );
    }

    // No variant is written when it would not be smaller; the file is served as it is.
    assert!(!root.path().join("note.txt.br").exists());
    let note = get(&server, "/note.txt", &[(ACCEPT_ENCODING, "br, gzip")]).await;
    assert!(note.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(note.bytes().await.expect("body").as_ref(), b"x");
}

#[tokio::test]
async fn a_reload_only_revalidates() {
    let root = WebRoot::new();
    let server = start(&root.path());
    let first = get(&server, "/app.wasm", &[(ACCEPT_ENCODING, "br")]).await;
    let modified = first
        .headers()
        .get(LAST_MODIFIED)
        .expect("a Last-Modified validator")
        .to_str()
        .expect("ascii")
        .to_owned();
    let again = get(
        &server,
        "/app.wasm",
        &[(ACCEPT_ENCODING, "br"), (IF_MODIFIED_SINCE, &modified)],
    )
    .await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert!(again.bytes().await.expect("body").is_empty());

    // An older copy is not revalidated: the whole file comes back.
    let stale = get(
        &server,
        "/app.wasm",
        &[(IF_MODIFIED_SINCE, "Thu, 01 Jan 1970 00:00:00 GMT")],
    )
    .await;
    assert_eq!(stale.status(), StatusCode::OK);
}

#[tokio::test]
async fn nothing_outside_the_web_root_is_served() {
    let root = WebRoot::new();
    let server = start(&root.path());
    for path in [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/app.wasm.br/../../secret.txt",
    ] {
        let answer = get(&server, path, &[(ACCEPT_ENCODING, "br, gzip")]).await;
        let status = answer.status();
        let body = answer.bytes().await.expect("body");
        assert!(
            status == StatusCode::NOT_FOUND || status == StatusCode::BAD_REQUEST,
            "{path}: {status}"
        );
        assert!(!body.windows(6).any(|w| w == b"secret"), "{path}");
    }
}
