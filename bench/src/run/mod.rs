//! `truecold run`: from a checked plan ([`crate::plan`]) to a written, verified bundle or
//! multi-arm directory. [`dispatch::run`] is the entry; the kind of campaign the plan is
//! picks one of [`plain_campaign`] (truecold-vmm on this host), [`engines_campaign`]
//! (several engines, serial observer), [`parity_campaign`] (the parity contract) and
//! [`nested_campaign`] (any of them inside the nested harness's L1). [`run_error`] is the
//! layer's one error, [`outcome`] what a finished run says.

pub mod dispatch;
pub mod engines_campaign;
pub mod nested_campaign;
pub mod outcome;
pub mod parity_campaign;
pub mod plain_campaign;
pub mod run_error;
