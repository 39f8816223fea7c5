// A member's stored name made into path components, checked as a directory listing's names are
// (DirectoryListing.problem(withName:) and holdsControlCharacter, the same functions): a member never lands
// outside its archive's folder. `./` and empty components are what tar and zip write for ordinary names and are
// dropped; `..`, an absolute path, a control character or a path deeper than the bound refuse the member.
import RangeFSCatalog

/// Turning an archive's member names into safe path components.
enum MemberPath {
    /// What became of a stored name.
    enum Outcome: Equatable {
        case components([String])
        /// The name is the archive's own folder (`./`, `/` alone in some tars): nothing to add.
        case root
        case refused(String)
    }

    /// The components of `name` (separated by `/`), or why the member is refused.
    static func components(of name: String, maximumDepth: Int) -> Outcome {
        if name.utf8.first == UInt8(ascii: "/") { return .refused("an absolute path") }
        if DirectoryListing.holdsControlCharacter(name) { return .refused("a control character in its name") }
        var components: [String] = []
        for part in name.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            let component = String(decoding: part, as: UTF8.self)
            if component == "." { continue }
            if component == ".." { return .refused("a '..' in its path") }
            if let problem = DirectoryListing.problem(withName: component) { return .refused(problem) }
            components.append(component)
            if components.count > maximumDepth { return .refused("deeper than \(maximumDepth) folders") }
        }
        return components.isEmpty ? .root : .components(components)
    }
}
