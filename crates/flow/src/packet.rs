//! Packets ([`Packet`]) and their sizes (001 §5.2, "CPU cache support").

/// Packet size used when the topology reports no L2 cache (a synthetic machine without caches).
pub const FALLBACK_PACKET_BYTES: usize = 128 * 1024;

/// Largest default packet (64 MiB, half a 128 MiB L2, far above any real one): a model
/// machine's L2 is bounded at load (`nearflow_topo`), and this keeps a packet allocatable
/// whatever a hand-made topology says.
pub const MAX_DEFAULT_PACKET_BYTES: usize = 64 << 20;

/// The default packet size on `machine`: half its L2 cache (001 §5.2, "CPU cache support"), or
/// [`FALLBACK_PACKET_BYTES`] when it has none; at most [`MAX_DEFAULT_PACKET_BYTES`].
pub fn default_packet_bytes(machine: &nearflow_topo::Machine) -> usize {
    machine
        .pus()
        .first()
        .and_then(|pu| machine.cache_size(pu.index, 2))
        .map_or(FALLBACK_PACKET_BYTES, |l2| {
            (l2 / 2).clamp(1, MAX_DEFAULT_PACKET_BYTES as u64) as usize
        })
}

/// Tuples of `tuple_bytes` each in a packet of `packet_bytes` (at least one).
pub fn packet_capacity(packet_bytes: usize, tuple_bytes: usize) -> usize {
    (packet_bytes / tuple_bytes.max(1)).max(1)
}

/// A packet: a batch of tuples of one type, the unit operators exchange (001 §3.1). It owns
/// its buffer, which an operator fills up to the plan's packet size (`Io::capacity_of`), and
/// reads as a slice of tuples (`Deref`), by value (`IntoIterator`, [`into_vec`](Self::into_vec)).
/// It knows its size in bytes and, when the nearflow allocator gave its buffer, the NUMA node
/// that buffer is on.
///
/// ```
/// use nearflow_flow::Packet;
/// let p: Packet<u64> = vec![1, 2, 3].into();
/// assert_eq!(p.len(), 3);
/// assert_eq!(p.iter().sum::<u64>(), 6);
/// assert!(p.bytes() >= 24);
/// assert_eq!(p.into_vec(), vec![1, 2, 3]);
/// ```
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Packet<T> {
    tuples: Vec<T>,
}

impl<T> Packet<T> {
    /// A packet of these tuples.
    pub fn new(tuples: Vec<T>) -> Self {
        Packet { tuples }
    }

    /// An empty packet with room for `n` tuples.
    pub fn with_capacity(n: usize) -> Self {
        Packet {
            tuples: Vec::with_capacity(n),
        }
    }

    /// Appends a tuple.
    pub fn push(&mut self, t: T) {
        self.tuples.push(t);
    }

    /// The size of its buffer in bytes (room for tuples included): what it occupies in a
    /// cache or in the allocator.
    pub fn bytes(&self) -> usize {
        self.tuples.capacity() * std::mem::size_of::<T>()
    }

    /// The NUMA node whose memory holds the buffer, when the process's nearflow allocator gave
    /// it (a packet-sized buffer under `nearflow_alloc::Nearflow`); None otherwise.
    #[cfg(not(loom))]
    pub fn node(&self) -> Option<usize> {
        if self.tuples.capacity() == 0 || std::mem::size_of::<T>() == 0 {
            return None;
        }
        nearflow_alloc::GLOBAL.node_of(self.tuples.as_ptr().cast())
    }

    /// The tuples, as a vector.
    pub fn into_vec(self) -> Vec<T> {
        self.tuples
    }
}

impl<T> From<Vec<T>> for Packet<T> {
    fn from(tuples: Vec<T>) -> Self {
        Packet { tuples }
    }
}

impl<T> From<Packet<T>> for Vec<T> {
    fn from(p: Packet<T>) -> Self {
        p.tuples
    }
}

impl<T> std::ops::Deref for Packet<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.tuples
    }
}

impl<T> std::ops::DerefMut for Packet<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.tuples
    }
}

impl<T> IntoIterator for Packet<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.tuples.into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Packet<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.tuples.iter()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Packet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet")
            .field("tuples", &self.tuples.len())
            .field("bytes", &self.bytes())
            .finish()
    }
}
