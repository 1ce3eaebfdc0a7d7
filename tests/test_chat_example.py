"""examples/chat/app.py in a real browser: headless Chromium (Selenium)
against the example's Starlette app and worker pool on a real database.

  test_a_chat_turn_streams_its_answer_then_ends
      the page submits a turn (class 0), the browser shows the answer while
      it is being written (status "writing", part of the words) and then the
      whole of it with the run's status and result; the events stream sent
      again with Last-Event-ID: 3 starts at chunk 4 and ends with the same
      end event.
"""
from __future__ import annotations

import importlib.util
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from types import ModuleType

import pytest
import uvicorn
from pgutil import ROOT, free_port
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.once


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chat_example", ROOT / "examples/chat/app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def site(db_url: str) -> Iterator[str]:
    chat = example()
    pool = chat.worker(db_url)
    pool.start()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(chat.create_app(db_url), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        pool.stop()
        pool.join()


@pytest.fixture
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()


def test_a_chat_turn_streams_its_answer_then_ends(site: str, browser: WebDriver) -> None:
    browser.get(site)
    browser.find_element(By.ID, "text").send_keys("hello")
    browser.find_element(By.CSS_SELECTOR, "#ask button").click()
    whole = "You said: hello. runq streamed this answer to you word by word."
    seen_partial = False
    deadline = time.monotonic() + 30
    while True:
        status, answer = browser.execute_script(
            "return [document.getElementById('status').textContent,"
            " document.getElementById('answer').textContent]")
        if status == "writing" and 0 < len(answer) < len(whole):
            seen_partial = True
        if status == "succeeded":
            break
        assert time.monotonic() < deadline, (status, answer)
        time.sleep(0.01)
    assert seen_partial, "the answer arrived all at once"
    assert browser.find_element(By.ID, "answer").text == whole
    result = json.loads(browser.find_element(By.ID, "answer").get_attribute("data-result") or "")
    assert result == {"answer": whole, "words": len(whole.split(" "))}

    # A browser that reconnects sends the last id it saw: the stream resumes after it.
    request = urllib.request.Request(f"{site}/turns/1/events", headers={"Last-Event-ID": "3"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read().decode()
    ids = [int(line[4:]) for line in body.splitlines() if line.startswith("id: ")]
    assert ids == list(range(4, len(whole.split(" ")) + 1))
    assert body.rstrip().endswith(
        'event: end\ndata: {"status": "succeeded", "result": ' + json.dumps(result) + "}")
