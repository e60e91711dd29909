//! Prices per million tokens and the cost of a call.
//!
//! Order of preference: the cost the provider reports (OpenRouter), 0 for a free
//! (local) provider, the price table (config `[llm.prices]` over the built-in defaults),
//! else unknown (`None`, never 0).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::types::{Cost, CostSource, Usage};

pub use crate::config::llm::Price;

const fn p(input: f64, cached: f64, write: f64, output: f64) -> Price {
    Price {
        input_per_mtok: input,
        output_per_mtok: output,
        cached_input_per_mtok: Some(cached),
        cache_write_per_mtok: Some(write),
    }
}

/// Built-in list prices (USD per million tokens: input, cached input, cache write, output)
/// as published in late 2025. They are DEFAULTS that drift: override them with
/// `[llm.prices."MODEL"]` in the config. Dated variants (`-2025-08-07`, `-20250929`) and
/// `-latest` map onto these names; `vendor/model` names (OpenRouter) onto `model`.
const BUILTIN: &[(&str, Price)] = &[
    ("gpt-4o", p(2.50, 1.25, 2.50, 10.00)),
    ("gpt-4o-mini", p(0.15, 0.075, 0.15, 0.60)),
    ("gpt-4.1", p(2.00, 0.50, 2.00, 8.00)),
    ("gpt-4.1-mini", p(0.40, 0.10, 0.40, 1.60)),
    ("gpt-4.1-nano", p(0.10, 0.025, 0.10, 0.40)),
    ("gpt-5", p(1.25, 0.125, 1.25, 10.00)),
    ("gpt-5-mini", p(0.25, 0.025, 0.25, 2.00)),
    ("gpt-5-nano", p(0.05, 0.005, 0.05, 0.40)),
    ("o3", p(2.00, 0.50, 2.00, 8.00)),
    ("o3-mini", p(1.10, 0.55, 1.10, 4.40)),
    ("o4-mini", p(1.10, 0.275, 1.10, 4.40)),
    ("deepseek-chat", p(0.28, 0.028, 0.28, 0.42)),
    ("deepseek-reasoner", p(0.28, 0.028, 0.28, 0.42)),
    ("claude-opus-4-0", p(15.00, 1.50, 18.75, 75.00)),
    ("claude-opus-4", p(15.00, 1.50, 18.75, 75.00)),
    ("claude-opus-4-1", p(15.00, 1.50, 18.75, 75.00)),
    ("claude-opus-4-5", p(5.00, 0.50, 6.25, 25.00)),
    ("claude-sonnet-4-0", p(3.00, 0.30, 3.75, 15.00)),
    ("claude-sonnet-4", p(3.00, 0.30, 3.75, 15.00)),
    ("claude-sonnet-4-5", p(3.00, 0.30, 3.75, 15.00)),
    ("claude-haiku-4-5", p(1.00, 0.10, 1.25, 5.00)),
];

/// Model name -> price: built-ins overlaid with the config's entries.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PriceTable {
    entries: BTreeMap<String, Price>,
}

impl PriceTable {
    /// The built-in defaults only.
    pub fn builtin() -> Self {
        Self {
            entries: BUILTIN.iter().map(|(m, p)| (m.to_string(), *p)).collect(),
        }
    }

    /// The built-in defaults with `overrides` replacing or adding entries.
    pub fn with_overrides(overrides: &BTreeMap<String, Price>) -> Self {
        let mut table = Self::builtin();
        table
            .entries
            .extend(overrides.iter().map(|(m, p)| (m.clone(), *p)));
        table
    }

    /// The price of `model`: an exact entry, else the name without a `vendor/` prefix,
    /// else the name without a date or `-latest` suffix.
    pub fn lookup(&self, model: &str) -> Option<&Price> {
        let mut candidates = vec![model];
        if let Some((_, bare)) = model.rsplit_once('/') {
            candidates.push(bare);
        }
        for name in candidates {
            if let Some(price) = self.entries.get(name) {
                return Some(price);
            }
            if let Some(price) = strip_version_suffix(name).and_then(|base| self.entries.get(base))
            {
                return Some(price);
            }
        }
        None
    }
}

/// `gpt-4o-2024-08-06` -> `gpt-4o`, `claude-sonnet-4-5-20250929` -> `claude-sonnet-4-5`,
/// `x-latest` -> `x`. Anything else (`gpt-4o-mini`) is not a version suffix.
fn strip_version_suffix(name: &str) -> Option<&str> {
    if let Some(base) = name.strip_suffix("-latest") {
        return Some(base);
    }
    let bytes = name.as_bytes();
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    // -YYYYMMDD
    if bytes.len() > 9 && bytes[bytes.len() - 9] == b'-' && digits(&bytes[bytes.len() - 8..]) {
        return Some(&name[..name.len() - 9]);
    }
    // -YYYY-MM-DD
    let n = bytes.len();
    if n > 11
        && bytes[n - 11] == b'-'
        && bytes[n - 6] == b'-'
        && bytes[n - 3] == b'-'
        && digits(&bytes[n - 10..n - 6])
        && digits(&bytes[n - 5..n - 3])
        && digits(&bytes[n - 2..])
    {
        return Some(&name[..n - 11]);
    }
    None
}

/// The cost of `usage` at `price`, in USD.
pub fn price_usage(usage: &Usage, price: &Price) -> f64 {
    let cached = usage.cached_input_tokens.min(usage.input_tokens);
    let writes = usage.cache_write_tokens.min(usage.input_tokens - cached);
    let fresh = usage.input_tokens - cached - writes;
    let per = |tokens: u64, rate: f64| tokens as f64 * rate / 1_000_000.0;
    per(fresh, price.input_per_mtok)
        + per(
            cached,
            price.cached_input_per_mtok.unwrap_or(price.input_per_mtok),
        )
        + per(
            writes,
            price.cache_write_per_mtok.unwrap_or(price.input_per_mtok),
        )
        + per(usage.output_tokens, price.output_per_mtok)
}

/// The cost of a call: reported, free, priced, or unknown.
pub fn cost_of(usage: &Usage, model: &str, free: bool, prices: &PriceTable) -> Option<Cost> {
    if let Some(usd) = usage.reported_cost_usd {
        return Some(Cost {
            usd,
            source: CostSource::Reported,
        });
    }
    if free {
        return Some(Cost {
            usd: 0.0,
            source: CostSource::Free,
        });
    }
    prices.lookup(model).map(|price| Cost {
        usd: price_usage(usage, price),
        source: CostSource::PriceTable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: u64, write: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            cached_input_tokens: cached,
            cache_write_tokens: write,
            output_tokens: output,
            ..Usage::default()
        }
    }

    #[test]
    fn lookup_exact_dated_and_vendor_prefixed() {
        let t = PriceTable::builtin();
        assert_eq!(t.lookup("gpt-4o").unwrap().input_per_mtok, 2.50);
        assert_eq!(t.lookup("gpt-4o-2024-08-06").unwrap().input_per_mtok, 2.50);
        assert_eq!(t.lookup("gpt-4o-mini").unwrap().input_per_mtok, 0.15);
        assert_eq!(
            t.lookup("claude-sonnet-4-5-20250929")
                .unwrap()
                .output_per_mtok,
            15.0
        );
        assert_eq!(
            t.lookup("claude-opus-4-5-20251101")
                .unwrap()
                .output_per_mtok,
            25.0
        );
        assert_eq!(
            t.lookup("claude-opus-4-20250514").unwrap().output_per_mtok,
            75.0
        );
        assert_eq!(t.lookup("openai/gpt-5").unwrap().output_per_mtok, 10.0);
        assert_eq!(t.lookup("deepseek-chat").unwrap().input_per_mtok, 0.28);
    }

    #[test]
    fn unknown_models_stay_unknown() {
        let t = PriceTable::builtin();
        assert!(
            t.lookup("gpt-4o-mega").is_none(),
            "a suffix that is not a date must not match"
        );
        assert!(t.lookup("qwen2.5-coder:7b").is_none());
        assert_eq!(
            cost_of(&usage(10, 0, 0, 10), "qwen2.5-coder:7b", false, &t),
            None
        );
    }

    #[test]
    fn cost_splits_cached_and_cache_write_input() {
        let t = PriceTable::builtin();
        // claude-sonnet-4-5: 1M total input of which 400k cache reads and 100k cache writes.
        let u = usage(1_000_000, 400_000, 100_000, 1_000_000);
        let cost = cost_of(&u, "claude-sonnet-4-5", false, &t).unwrap();
        let expected = 0.5 * 3.0 + 0.4 * 0.30 + 0.1 * 3.75 + 15.0;
        assert!(
            (cost.usd - expected).abs() < 1e-9,
            "{} vs {expected}",
            cost.usd
        );
        assert_eq!(cost.source, CostSource::PriceTable);
    }

    #[test]
    fn reported_beats_free_beats_table_and_overrides_apply() {
        let mut overrides = BTreeMap::new();
        overrides.insert(
            "gpt-4o".to_string(),
            Price {
                input_per_mtok: 1.0,
                output_per_mtok: 2.0,
                cached_input_per_mtok: None,
                cache_write_per_mtok: None,
            },
        );
        let t = PriceTable::with_overrides(&overrides);
        let mut u = usage(1_000_000, 500_000, 0, 1_000_000);
        let c = cost_of(&u, "gpt-4o", false, &t).unwrap();
        assert!(
            (c.usd - 3.0).abs() < 1e-9,
            "cached defaults to input price: {}",
            c.usd
        );
        assert_eq!(
            cost_of(&u, "gpt-4o", true, &t).unwrap(),
            Cost {
                usd: 0.0,
                source: CostSource::Free
            }
        );
        u.reported_cost_usd = Some(0.42);
        assert_eq!(
            cost_of(&u, "gpt-4o", true, &t).unwrap(),
            Cost {
                usd: 0.42,
                source: CostSource::Reported
            }
        );
    }
}
