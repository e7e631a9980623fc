//! The registry the binary hands to the engines: every built-in plugin, listed once in
//! `ferry-plugins` (shared with the Spark module).

use ferry_api::Registry;

/// All built-in plugins.
pub fn builtin() -> Registry {
    ferry_plugins::builtin()
}
