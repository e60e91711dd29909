//! Backoff delays and the server's `retry-after-ms` / `retry-after` headers.

use std::time::Duration;

use reqwest::header::HeaderMap;

use super::config::RetryPolicy;

/// The delay before attempt `failed + 1`, after `failed` failures: the server's wish if
/// it gave one, else `base * 2^(failed-1)` plus up to 25 % jitter; capped at `max_delay`.
pub fn delay(policy: &RetryPolicy, failed: u32, server: Option<Duration>) -> Duration {
    let d = server.unwrap_or_else(|| {
        let exp = policy
            .base_delay
            .saturating_mul(1u32 << failed.saturating_sub(1).min(16));
        exp.mul_f64(1.0 + 0.25 * jitter())
    });
    d.min(policy.max_delay)
}

/// A number in [0, 1) that differs from call to call (no need for a real RNG here).
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1000) / 1000.0
}

/// `retry-after-ms` (milliseconds, OpenAI), else `retry-after` (seconds; HTTP dates are
/// ignored).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    number("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| number("retry-after").map(Duration::from_secs_f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_with_cap_and_server_wish() {
        let p = RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        };
        let d1 = delay(&p, 1, None);
        assert!(
            d1 >= Duration::from_secs(1) && d1 <= Duration::from_millis(1250),
            "{d1:?}"
        );
        let d3 = delay(&p, 3, None);
        assert!(
            d3 >= Duration::from_secs(4) && d3 <= Duration::from_secs(5),
            "{d3:?}"
        );
        let flat = RetryPolicy {
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(10),
            ..p
        };
        assert_eq!(
            delay(&flat, 1, None),
            Duration::from_millis(10),
            "jitter never goes below the base"
        );
        assert_eq!(delay(&p, 10, None), Duration::from_secs(30));
        assert_eq!(
            delay(&p, 1, Some(Duration::from_millis(20))),
            Duration::from_millis(20)
        );
        assert_eq!(
            delay(&p, 1, Some(Duration::from_secs(600))),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        h.insert("retry-after-ms", "soon".parse().unwrap());
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
    }
}
