//! Packet sizes (001 §5.2, "CPU cache support").

/// Packet size used when the topology reports no L2 cache (a synthetic machine without caches).
pub const FALLBACK_PACKET_BYTES: usize = 128 * 1024;

/// The default packet size on `machine`: half its L2 cache (001 §5.2, "CPU cache support"), or
/// [`FALLBACK_PACKET_BYTES`] when it has none.
pub fn default_packet_bytes(machine: &nearflow_topo::Machine) -> usize {
    machine
        .pus()
        .first()
        .and_then(|pu| machine.cache_size(pu.index, 2))
        .map_or(FALLBACK_PACKET_BYTES, |l2| (l2 / 2).max(1) as usize)
}

/// Tuples of `tuple_bytes` each in a packet of `packet_bytes` (at least one).
pub fn packet_capacity(packet_bytes: usize, tuple_bytes: usize) -> usize {
    (packet_bytes / tuple_bytes.max(1)).max(1)
}
