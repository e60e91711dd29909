//! Evaluator (issue 2).
