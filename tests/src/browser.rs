//! Driving the dashboard in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`) over WebDriver: chromedriver on a free port, a browser session,
//! screenshots under `target/browser-screenshots/`, and waiting for elements.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};

use crate::wait_for;

/// How long any browser step may take.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// chromedriver on a free port, killed on drop.
pub struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Starts chromedriver on a free port and waits until it listens.
pub async fn start_driver() -> Driver {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (Debian package chromium-driver) must be installed; .ci/run installs it");
    let driver = Driver { child, port };
    wait_for("chromedriver to listen", DEADLINE, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok().map(|_| ())
    })
    .await;
    driver
}

/// A Chromium session with its own profile directory and a viewport of `size` (width,
/// height). Below 500 px wide (Chromium's smallest window), a phone is emulated: that
/// viewport, twice the pixel density, touch.
pub async fn browser(driver: &Driver, profile: &Path, size: (u32, u32)) -> Client {
    let mut caps = serde_json::Map::new();
    let mut options = serde_json::json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", format!("--window-size={},{}", size.0, size.1),
                format!("--user-data-dir={}", profile.display()),
            ]
    });
    if size.0 < 500 {
        options["mobileEmulation"] = serde_json::json!({
            "deviceMetrics": { "width": size.0, "height": size.1, "pixelRatio": 2.0, "touch": true }
        });
    }
    caps.insert("goog:chromeOptions".into(), options);
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a Chromium session")
}

/// `target/browser-screenshots/`, created.
pub fn screenshots_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/browser-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// Saves the window as `target/browser-screenshots/{name}.png` (`name` may hold a `/`).
pub async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    let path = screenshots_dir().join(format!("{name}.png"));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("screenshot dir");
    }
    std::fs::write(path, png).expect("write screenshot");
}

/// The element `css`, waiting (up to the deadline) for it to appear after a navigation.
async fn element(client: &Client, css: &str) -> fantoccini::elements::Element {
    client
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("element {css}: {e}"))
}

/// The text of `css`, waiting (up to the deadline) for it to appear after a navigation.
pub async fn text(client: &Client, css: &str) -> String {
    element(client, css).await.text().await.expect("text")
}

/// Clicks `css`, waiting (up to the deadline) for it to appear after a navigation.
pub async fn click(client: &Client, css: &str) {
    element(client, css).await.click().await.unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// The dashboard, mounted at `/jobs` in an app served on a free port of 127.0.0.1: its base
/// URL, the port, and the server's handle (stop it at the end). Call inside a Tokio runtime.
pub fn serve_dashboard(
    config: jobs_dashboard::DashboardConfig,
) -> (String, u16, actix_web::dev::ServerHandle) {
    let server = actix_web::HttpServer::new(move || {
        actix_web::App::new().service(jobs_dashboard::scope("/jobs", config.clone()))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .expect("bind");
    let port = server.addrs()[0].port();
    let server = server.run();
    let handle = server.handle();
    tokio::spawn(server);
    (format!("http://127.0.0.1:{port}/jobs"), port, handle)
}
