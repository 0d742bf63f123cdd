"""The chat page (examples/chat/index.html) in headless Chromium (Debian's chromium and
chromium-driver, driven by selenium): send a message, see streamed text, press Stop."""
import os
import shutil
from pathlib import Path

import pytest

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")


@pytest.fixture()
def browser():
    if not CHROMIUM or not DRIVER:
        pytest.skip("chromium and chromium-driver (Debian packages) are needed")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1000,700"]:
        opts.add_argument(a)
    b = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=opts)
    yield b
    b.quit()


def test_chat_page_streams_and_stops(server, browser):
    browser.get(server.url + "/?ignore_eos=1")
    wait = WebDriverWait(browser, 60, poll_frequency=0.02)
    wait.until(lambda b: b.find_element(By.ID, "status").text == "connected")
    box = browser.find_element(By.ID, "input")
    box.send_keys("Tell me a long story about a dragon.")
    browser.find_element(By.ID, "send").click()
    reply = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, ".msg.assistant"))[-1]
    # Streamed: text shows up while the generation still runs (Stop is enabled).
    wait.until(lambda b: len(reply.text.strip()) > 20)
    assert browser.find_element(By.ID, "stop").is_enabled()
    browser.find_element(By.ID, "stop").click()
    wait.until(lambda b: reply.get_attribute("data-finish"))
    assert reply.get_attribute("data-finish") == "cancelled"
    assert not browser.find_element(By.ID, "stop").is_enabled()
    shot = os.environ.get("TANDEM_SCREENSHOT", str(Path(__file__).resolve().parents[2] / "build" / "chat-page.png"))
    Path(shot).parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(shot)
    m = server.wait_idle()
    assert m["tandem:kv_blocks_used"] == 0
