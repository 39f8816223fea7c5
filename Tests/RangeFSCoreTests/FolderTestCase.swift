import Logging
import RangeFSTestSupport
import XCTest

/// A test case whose every test gets a temporary folder of its own (a cache's root, usually), removed after it:
/// XCTest keeps test cases alive, so the folder is released in `tearDown`, not with the case.
class FolderTestCase: XCTestCase {
    let logger = Logger(label: "test")
    var directory: TemporaryDirectory!

    /// The start of the folder's name under /tmp, to tell whose it is.
    class var folderPrefix: String { "test" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = try TemporaryDirectory(prefix: Self.folderPrefix)
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }
}
