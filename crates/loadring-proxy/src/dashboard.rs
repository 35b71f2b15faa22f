//! The live dashboard the admin listener serves at `/`: one page, its script
//! and its style sheet, embedded in the binary (no CDN, no fonts, no build
//! step). The script polls `/status?endpoints=200` once a second (each
//! cluster's 200 busiest endpoints: a larger membership is not drawn row by
//! row) and draws everything itself; `?refresh=0` freezes it after one
//! reading.
//!
//! Every admin response carries a Content-Security-Policy that lets the
//! page run only its own script and style sheet and talk only to its own
//! origin, so even an endpoint name that slipped into the page as markup
//! could run nothing; the script never builds markup from data anyway
//! (`textContent` only).

use http::{header, HeaderMap, HeaderValue};

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its text.
    pub body: &'static str,
}

const PAGE: Asset = Asset {
    content_type: "text/html; charset=utf-8",
    body: include_str!("dashboard/index.html"),
};
const SCRIPT: Asset = Asset {
    content_type: "text/javascript; charset=utf-8",
    body: include_str!("dashboard/dashboard.js"),
};
const STYLE: Asset = Asset {
    content_type: "text/css; charset=utf-8",
    body: include_str!("dashboard/dashboard.css"),
};

/// The page's policy: its own script, style sheet and `/status`, nothing
/// inline, nothing from elsewhere, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The embedded file served at `path`, if any.
pub fn asset(path: &str) -> Option<Asset> {
    match path {
        "/" | "/index.html" => Some(PAGE),
        "/dashboard.js" => Some(SCRIPT),
        "/dashboard.css" => Some(STYLE),
        _ => None,
    }
}

/// Adds the security headers every admin response carries.
pub fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // Live data: a cached /status would show a stale picture.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_served_by_path() {
        assert!(asset("/").unwrap().body.contains("/dashboard.js"));
        assert_eq!(
            asset("/dashboard.js").unwrap().content_type,
            "text/javascript; charset=utf-8"
        );
        assert!(asset("/status").is_none());
    }

    #[test]
    fn the_page_loads_only_its_own_files_and_nothing_inline() {
        let page = PAGE.body;
        assert!(page.contains(r#"<script src="/dashboard.js""#));
        assert!(page.contains(r#"href="/dashboard.css""#));
        // CSP has no 'unsafe-inline': an inline script or style would be
        // refused by the browser, so none may be written.
        assert_eq!(page.matches("<script").count(), 1);
        assert!(!page.contains("<style"));
        assert!(!page.contains("style="));
        assert!(!page.contains(" on"), "no inline event handler");
        for text in [PAGE.body, SCRIPT.body, STYLE.body] {
            assert!(!text.contains("http://") && !text.contains("https://"));
            assert!(!text.contains("@import") && !text.contains("@font-face"));
        }
    }

    #[test]
    fn the_script_builds_no_markup_from_data() {
        for risky in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!SCRIPT.body.contains(risky), "{risky}");
        }
    }
}
