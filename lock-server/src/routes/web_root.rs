//! The static files under `--web-root` (the dashboard in `www/`), served like a web app:
//! - precompressed: a request whose `Accept-Encoding` allows it gets `FILE.br` or `FILE.gz`
//!   when one lies beside `FILE` (scripts/build-ui.sh writes them for the dashboard's wasm
//!   and JS, at the highest levels, once per build instead of once per request); otherwise
//!   the file itself. `Vary: Accept-Encoding` keeps shared caches from mixing the variants.
//! - revalidated: every answer carries `Last-Modified` and `Cache-Control: no-cache`, so a
//!   browser keeps its copy and a reload costs a 304 to `If-Modified-Since`, while a new
//!   build (whose file names do not change) is picked up on the next load.

use std::path::Path;

use axum::http::{header, HeaderValue};
use tower::Layer;
use tower_http::services::ServeDir;
use tower_http::set_header::{SetResponseHeader, SetResponseHeaderLayer};

/// The service answering every path no route claims, from the files under `root`.
pub fn files(
    root: &Path,
) -> SetResponseHeader<SetResponseHeader<ServeDir, HeaderValue>, HeaderValue> {
    let dir = ServeDir::new(root).precompressed_br().precompressed_gzip();
    let vary = SetResponseHeaderLayer::appending(
        header::VARY,
        HeaderValue::from_static("accept-encoding"),
    );
    let revalidate = SetResponseHeaderLayer::overriding(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    revalidate.layer(vary.layer(dir))
}
