//! Console sink (prints rows with their kind) and Blackhole sink (counts and drops)
