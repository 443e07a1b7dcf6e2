@testable import authctl
import XCTest

/// kube-credential waits for a sign-in only when kubectl says the user is there.
final class KubeInteractiveTests: XCTestCase {
    func testSpecInteractiveIsRead() {
        let info = { (interactive: String) in
            #"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":"# + interactive + "}}"
        }
        XCTAssertEqual(KubeCredential.interactive(info("true")), true)
        XCTAssertEqual(KubeCredential.interactive(info("false")), false)
        XCTAssertNil(KubeCredential.interactive(#"{"apiVersion":"client.authentication.k8s.io/v1","spec":{}}"#))
        XCTAssertNil(KubeCredential.interactive(nil))
        XCTAssertNil(KubeCredential.interactive("not json"))
    }
}
