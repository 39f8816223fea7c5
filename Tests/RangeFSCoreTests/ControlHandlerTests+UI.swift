@testable import RangeFSCache
@testable import RangeFSControl
@testable import RangeFSFileSystem
import XCTest

/// Issue 50: what `rangefs ui` asks of a mount besides status: `blockmap NAME WIDTH`, the fine block map of the
/// file it shows in detail, and the status of the files whose entry is open, each second.
extension ControlHandlerTests {
    func testActiveStatusListsTheFilesWhoseEntryIsOpenAndNoOther() throws {
        let active = ControlRequest(command: .status, active: true)
        XCTAssertEqual(control.handle(active).files?.map(\.name), [], "nothing open")
        try readAll("first.bin")
        let response = control.handle(active)
        let files = try XCTUnwrap(response.files)
        XCTAssertEqual(files.map(\.name), ["first.bin"], "second.bin is untouched")
        // The same description a full status gives of it.
        let full = try XCTUnwrap(handle(.status, all: true).files?.first { $0.name == "first.bin" })
        XCTAssertEqual(files[0].state, "complete")
        XCTAssertEqual(files[0].cachedBytes, full.cachedBytes)
        XCTAssertEqual(files[0].map, full.map)
        XCTAssertEqual(files[0].url, full.url)
        XCTAssertNil(response.totals, "no sums: they would need every file")
    }

    func testBlockmapDrawsEachCellsShareOfLocalBlocks() {
        var present = BlockBitmap(blockCount: 8)
        for block in [0, 1, 2, 5] { _ = present.insert(block) }
        // Two blocks a cell: both, one of two (a level of 4 of 8) twice, none.
        XCTAssertEqual(RangeFS.fineBlockMap(present, width: 4), "9440")
        // Wider than the file has blocks: one cell a block.
        XCTAssertEqual(RangeFS.fineBlockMap(present, width: 100), "99900900")
        // Three cells over eight blocks: 0-1 (both), 2-4 (one of three), 5-7 (one of three); a cell with one block
        // of many is never drawn empty.
        XCTAssertEqual(RangeFS.fineBlockMap(present, width: 3), "933")
        XCTAssertEqual(RangeFS.fineBlockMap(nil, width: 5), "00000", "nothing cached")
    }

    func testBlockmapAnswersForAFileOpenOrClosedAndRefusesABadWidthOrName() throws {
        func map(_ name: String, _ width: Int) -> ControlResponse {
            control.handle(ControlRequest(command: .blockmap, name: name, width: width))
        }
        XCTAssertEqual(map("second.bin", 12).message, String(repeating: "0", count: 12), "untouched")
        try readAll("first.bin")
        XCTAssertEqual(map("first.bin", 12).message, String(repeating: "9", count: 12), "complete, its entry open")
        XCTAssertEqual(map("first.bin", 12).message, RangeFS.fineBlockMap(try entry("first.bin").presentBlocks,
                                                                                width: 12))
        let refused = map("first.bin", ControlService.blockMapMaxWidth + 1)
        XCTAssertFalse(refused.ok)
        XCTAssertEqual(refused.error, "a block map is 1 to 4096 cells wide, not 4097")
        XCTAssertFalse(map("first.bin", 0).ok)
        XCTAssertEqual(map("nothing.bin", 10).error, "no file named 'nothing.bin' in this mount; see rangefs status")
    }
}
