@testable import BrokerCore
import XCTest

/// The browser sign-in's pages and the screen that tells the sign-in's redirect from others.
final class SignInPageTests: XCTestCase {
    func testTheScreenLetsOnlyTheSignInsStateThrough() {
        let screen = RedirectScreen.expecting(state: "s3cr3t-state", provider: "corp")
        XCTAssertEqual(screen.accept("code=abc&state=s3cr3t-state")?["code"], "abc")
        XCTAssertEqual(screen.accept("state=s3cr3t%2Dstate&code=a+b")?["code"], "a b")
        XCTAssertNil(screen.accept("code=abc"))
        XCTAssertNil(screen.accept("code=abc&state="))
        XCTAssertNil(screen.accept("code=abc&state=s3cr3t-stat"))
        XCTAssertNil(screen.accept("error=access_denied&state=other"))
        // Given twice, the state is ambiguous: refused even when one copy is right.
        XCTAssertNil(screen.accept("state=s3cr3t-state&state=s3cr3t-state"))
        XCTAssertEqual(screen.refused.status, 400)
        XCTAssertEqual(screen.late.status, 400)
    }

    func testEverythingFromTheProviderIsEscaped() {
        let page = SignInPage.failed(provider: "c<o>rp", reason: "the provider answered <script>alert('x')</script> & \"more\"; run `authctl login --provider c<o>rp` again")
        XCTAssertEqual(page.status, 400)
        XCTAssertFalse(page.html.contains("<script>"))
        XCTAssertTrue(page.html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;more&quot;"))
        XCTAssertTrue(page.html.contains("run <code>authctl login --provider c&lt;o&gt;rp</code> again"))
        let ok = SignInPage.signedIn(provider: "corp", account: "<b>alice</b>")
        XCTAssertEqual(ok.status, 200)
        XCTAssertTrue(ok.html.contains("&lt;b&gt;alice&lt;/b&gt;"))
    }

    func testPagesAreSelfContainedAndReadableInTheDark() {
        for page in [SignInPage.signedIn(provider: "corp", account: "alice"), .failed(provider: "corp", reason: "no"),
                     .notThisSignIn(provider: "corp"), .alreadyAnswered(provider: "corp"), .notFound] {
            XCTAssertTrue(page.html.hasPrefix("<!doctype html>"))
            XCTAssertTrue(page.html.contains("prefers-color-scheme:dark"))
            XCTAssertTrue(page.html.contains("authbroker"))
            XCTAssertFalse(page.html.contains("http://") || page.html.contains("https://") || page.html.contains("<script"))
            XCTAssertLessThan(page.html.utf8.count, 4096)
        }
    }

    func testCommandsInTheReasonAreSetAsCodeOnlyWhenTheirQuotesPair() {
        XCTAssertEqual(SignInPage.commands("run `authctl login` or `x`"), "run <code>authctl login</code> or <code>x</code>")
        XCTAssertEqual(SignInPage.commands("a ` b"), "a ` b")
        XCTAssertEqual(SignInPage.commands("no quotes"), "no quotes")
    }

    func testTheProvidersRefusalSaysWhatToDoNext() {
        func message(_ error: String, prompt: String? = nil, configured: String? = nil) -> String {
            ProviderRefusal.message(provider: "corp", error: error, description: nil, prompt: prompt, configuredPrompt: configured)
        }
        // prompt=none forbids the page the provider needs: running the same again cannot help.
        XCTAssertTrue(message("interaction_required", prompt: "none").hasSuffix("run `authctl login --provider corp` again without `--prompt none`"))
        XCTAssertTrue(message("login_required", prompt: "none", configured: "none").contains("remove prompt from authorization_params under [providers.corp]"))
        XCTAssertTrue(message("access_denied").contains("again and allow access"))
        XCTAssertEqual(message("login_required"), "the sign-in to corp was refused: the provider answered login_required; run `authctl login --provider corp` again")
        let odd = ProviderRefusal.message(provider: "corp", error: "bad\u{1B}[31m", description: "why\nnot", prompt: nil, configuredPrompt: nil)
        XCTAssertEqual(odd, "the sign-in to corp was refused: the provider answered bad[31m: whynot; run `authctl login --provider corp` again")
    }
}
