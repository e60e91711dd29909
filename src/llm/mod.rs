//! LLM providers (issue 3).
