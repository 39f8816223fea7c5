// Which entries the cache holds on disk, by name, in memory. `ls -l` of a listed directory asks every file how
// much of it is cached, and nearly all of a large listing's files have no entry: each question looked on disk
// (a path built from the URL's SHA-256, an open that fails, for a v1 cache an access too) and then remembered the
// answer in a set that grew by a key per file. For a million listed objects, that was a third of a 47 s `ls -l`
// and 16+ bytes of RSS per entry (issue 46).
//
// So the names of the entries in `entries/` are read once, at the first such question, and every entry made
// after is added (`CacheStore.forgetSummary`, which every path that makes an entry calls already, since the set
// of URLs known to hold nothing must forget them then too). A URL whose name is not here has no entry; one whose
// name is here is looked up on disk as before. Names are never taken out: an entry removed is looked up once more
// and found gone, which is what happened before this index.
import RangeFSSystem

/// The names of the entries on disk, as the 128 bits their 32 hex digits stand for.
struct EntryIndex {
    struct Key: Hashable {
        let high: UInt64
        let low: UInt64

        /// The key of `url`'s entry: the first 16 bytes of SHA-256(url), as `EntryFiles` names it in hex.
        init(url: String) {
            let digest = SHA256.digest(url.utf8)
            var high: UInt64 = 0, low: UInt64 = 0
            for index in 0..<8 {
                high = high << 8 | UInt64(digest[index])
                low = low << 8 | UInt64(digest[8 + index])
            }
            (self.high, self.low) = (high, low)
        }

        /// The key of the entry named `name` (32 hex digits); nil for any other name.
        init?(name: String) {
            let digits = Array(name.utf8)
            guard digits.count == 32 else { return nil }
            var halves: [UInt64] = [0, 0]
            for (index, digit) in digits.enumerated() {
                // Lowercase hex only: the names EntryFiles makes.
                let value: UInt8
                switch digit {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = digit - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): value = digit - UInt8(ascii: "a") + 10
                default: return nil
                }
                halves[index / 16] = halves[index / 16] << 4 | UInt64(value)
            }
            (high, low) = (halves[0], halves[1])
        }
    }

    private var keys: Set<Key> = []
    /// Whether `entries/` was read: until then, every name may be there.
    private(set) var isRead = false

    /// The keys of the entries under `root` (v2 files and v1 folders alike), read from `entries/`.
    static func keys(root: String) -> [Key] {
        EntryFiles.all(root: root).compactMap { Key(name: $0.name) }
    }

    /// Takes the keys read from `entries/`, keeping those added meanwhile: from now on a name not here is not
    /// on disk.
    mutating func adopt(_ read: [Key]) {
        keys.formUnion(read)
        isRead = true
    }

    /// Notes that `key`'s entry may exist from now on.
    mutating func insert(_ key: Key) {
        keys.insert(key)
    }

    /// Whether `entries/` was read and no entry is on disk (none was, and none was made since).
    var surelyEmpty: Bool { isRead && keys.isEmpty }

    /// Whether an entry of `key` may be on disk: false only when it surely is not.
    func mayHold(_ key: Key) -> Bool {
        !isRead || keys.contains(key)
    }
}
