//! The plain and JSON responses of the A2A server.

use http_body_util::{BodyExt as _, Full};

use crate::listener::BoxBody;

/// A plain-text response.
pub(super) fn plain(status: hyper::StatusCode, text: &str) -> hyper::Response<BoxBody> {
    response(status, "text/plain; charset=utf-8", text.to_string().into())
}

/// A JSON response.
pub(super) fn json(
    status: hyper::StatusCode,
    value: &serde_json::Value,
) -> hyper::Response<BoxBody> {
    response(status, "application/json", value.to_string().into())
}

fn response(
    status: hyper::StatusCode,
    content_type: &'static str,
    body: bytes::Bytes,
) -> hyper::Response<BoxBody> {
    let mut response = hyper::Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
