//! The speedscope export opened in speedscope's own web app: the npm package `speedscope`
//! (fetched once into the target directory with `npm pack`), served from localhost by a small
//! HTTP server in this test, loaded in headless Chromium; the rendered page must list the
//! program's frames and threads. Needs `npm` and `chromium` (`.ci/run` installs chromium).

use slice_trace_e2e::{cmd, python, root, run_ok, scratch, target_dir};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

const SPEEDSCOPE: &str = "speedscope@1.25.0";

/// speedscope's built web app (`dist/release`), unpacked under the target directory.
fn speedscope_app() -> PathBuf {
    let dir = target_dir().join("speedscope-npm");
    let app = dir.join("package/dist/release");
    if app.join("index.html").is_file() {
        return app;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("npm")
        .args(["pack", SPEEDSCOPE, "--silent", "--pack-destination"])
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("this test needs `npm` (to fetch {SPEEDSCOPE}): {e}"));
    assert!(out.status.success(), "npm pack {SPEEDSCOPE} failed: {}", String::from_utf8_lossy(&out.stderr));
    let tgz = String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap_or_default().to_string();
    let st = Command::new("tar").arg("xzf").arg(dir.join(&tgz)).arg("-C").arg(&dir).status().unwrap();
    assert!(st.success() && app.join("index.html").is_file(), "unpacking {tgz} gave no dist/release/index.html");
    app
}

/// Serve the files of `roots` (first match wins) on 127.0.0.1 from a background thread; the
/// port is returned.
fn serve(roots: Vec<PathBuf>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let roots = roots.clone();
            std::thread::spawn(move || {
                let mut line = String::new();
                let mut r = BufReader::new(&stream);
                if r.read_line(&mut line).is_err() {
                    return;
                }
                // Skip the headers.
                let mut h = String::new();
                while r.read_line(&mut h).is_ok_and(|n| n > 2) {
                    h.clear();
                }
                let path = line.split(' ').nth(1).unwrap_or("/").split(['?', '#']).next().unwrap_or("/").trim_start_matches('/');
                let path = if path.is_empty() { "index.html" } else { path };
                let file = (!path.contains("..")).then(|| roots.iter().map(|r| r.join(path)).find(|p| p.is_file())).flatten();
                let mut w = &stream;
                match file.and_then(|f| std::fs::read(&f).ok().map(|b| (f, b))) {
                    Some((f, body)) => {
                        let mime = match f.extension().and_then(|e| e.to_str()).unwrap_or("") {
                            "html" => "text/html",
                            "js" => "text/javascript",
                            "json" => "application/json",
                            "css" => "text/css",
                            "wasm" => "application/wasm",
                            "png" => "image/png",
                            "woff2" => "font/woff2",
                            _ => "application/octet-stream",
                        };
                        let _ = write!(
                            w,
                            "HTTP/1.1 200 OK\r\nContent-Type: {mime}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = w.write_all(&body);
                    }
                    None => {
                        let _ = write!(w, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    }
                }
            });
        }
    });
    port
}

fn chromium_dom(url: &str, profile_dir: &Path) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            // speedscope draws with WebGL: software rendering, as there is no GPU.
            "--enable-unsafe-swiftshader",
            "--use-angle=swiftshader",
            "--window-size=1400,800",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("this test needs Debian's `chromium` (apt-get install chromium; .ci/run does): {e}"));
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn speedscope_web_app_shows_the_exported_frames() {
    let app = speedscope_app();
    let dir = scratch();
    let d = dir.path().join("shop.d");
    let examples = root().join("examples/python");
    run_ok(cmd("trace").current_dir(&examples).arg("run").arg("-q").arg("-o").arg(&d).arg("--").arg(python()).arg("shop_app.py"));
    let export = dir.path().join("shop.speedscope.json");
    run_ok(cmd("slice").arg("export").arg(&d).args(["--format", "speedscope", "-o"]).arg(&export));
    let port = serve(vec![app, dir.path().to_path_buf()]);
    // The sandwich view lists every frame in an HTML table (the flame charts are canvases).
    let url = format!("http://127.0.0.1:{port}/index.html#profileURL=http://127.0.0.1:{port}/shop.speedscope.json&view=sandwich");
    let profile = dir.path().join("chromium-profile");
    let dom = chromium_dom(&url, &profile);
    assert!(!dom.contains("Something went wrong"), "speedscope failed to show the export:\n{dom}");
    for frame in ["load_catalogue", "parse_row", "compute_all", "checksum_in_subprocess"] {
        assert!(dom.contains(&format!(">{frame}<")) || dom.contains(&format!(">{frame} (")), "frame {frame} not in the page:\n{dom}");
    }
    assert!(dom.contains("MainThread [pid ") && dom.contains("python3 shop_app.py") && dom.contains("python3 checksum.py"), "{dom}");
}
