@testable import rangefs
import XCTest

/// What the user names to mount: `NAME=URL`, list files, and sizes. (Moved here with the types from the core.)
final class MountSourceTests: XCTestCase {
    func testMountSourcesAndListFiles() {
        XCTAssertEqual(MountSource(parsing: "movie.mp4=http://h/v?id=3"), MountSource(url: "http://h/v?id=3", name: "movie.mp4"))
        XCTAssertEqual(MountSource(parsing: "http://h/v?id=3"), MountSource(url: "http://h/v?id=3"))
        let list = MountSource.parseList("# files\n\nhttp://h/a\n  b.bin=https://h/b  \n#http://h/c\n")
        XCTAssertEqual(list, [MountSource(url: "http://h/a"), MountSource(url: "https://h/b", name: "b.bin")])
    }

    func testByteSizes() {
        XCTAssertEqual(ByteSize.parse("64K"), 65536)
        XCTAssertEqual(ByteSize.parse("1m"), 1 << 20)
        XCTAssertEqual(ByteSize.parse("4096"), 4096)
        XCTAssertNil(ByteSize.parse("lots"))
    }
}
