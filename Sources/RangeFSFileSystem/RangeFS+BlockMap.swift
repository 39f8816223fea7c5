// The `blockmap` verb: one file's block map finer than status's 50 cells, for `rangefs ui`'s canvas. The page
// asks for it only for the file it shows in detail, so a mount of 10,000 files pays for one bitmap a second, not
// 10,000: status's squeezed maps draw the rows.
import RangeFSCache

extension RangeFS {
    /// The most cells a blockmap answer holds: wider than any screen's canvas, small enough to send every second.
    package static let blockMapMaxWidth = 4096

    /// The block map of the file `name` in `width` cells (`fineBlockMap`), from its open entry, or else from its
    /// cache files (opening nothing).
    package func blockMap(name: String?, width: Int) -> VerbOutcome {
        guard let name, let item = catalog.item(named: name) else {
            return .failed("no file named '\(name ?? "")' in this mount; see rangefs status")
        }
        guard (1...Self.blockMapMaxWidth).contains(width) else {
            return .failed("a block map is 1 to \(Self.blockMapMaxWidth) cells wide, not \(width)")
        }
        guard item.metadata.sizeKnown else {
            return .failed("\(name) has no known size yet (its server sends no length); it has no block map")
        }
        // An open entry's bitmap is live; a closed file's is read from its cache files, opening nothing.
        let present = store.openEntry(for: item.metadata.url)?.presentBlocks
            ?? store.storedPresentBlocks(of: item.metadata, matchingSizeOnly: !item.validated)
        return .done(Self.fineBlockMap(present, width: width))
    }

    /// `present` in `width` cells, each the share of its blocks that is local as a digit: 0 none, 9 all, 1 to 8
    /// some (rounded up, so a cell with one block of many is never drawn empty). No bitmap: all 0.
    static func fineBlockMap(_ present: BlockBitmap?, width: Int) -> String {
        guard let present else { return String(repeating: "0", count: width) }
        guard present.blockCount > 0 else { return String(repeating: "9", count: width) }
        let cells = min(width, present.blockCount)
        var digits: [UInt8] = []
        digits.reserveCapacity(cells)
        for cell in 0..<cells {
            let lower = cell * present.blockCount / cells
            let upper = max(lower + 1, (cell + 1) * present.blockCount / cells)
            var have = 0
            for block in lower..<upper where present.contains(block) { have += 1 }
            let count = upper - lower
            let level = have == 0 ? 0 : have == count ? 9 : min(8, max(1, (have * 8 + count - 1) / count))
            digits.append(UInt8(ascii: "0") + UInt8(level))
        }
        return String(decoding: digits, as: UTF8.self)
    }
}
