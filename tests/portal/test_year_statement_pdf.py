"""A closed year's annual statement is a real PDF whose text carries the terms, the counts,
compliance with its Clopper-Pearson interval, the credit and its state, the incident list, the
rules version and the evidence hash."""

import io
import re

from pypdf import PdfReader

from yoco.guarantee import rules
from yoco.guarantee.evidence import evidence_hash
from yoco.guarantee.models import ContractYear, Incident
from yoco.lib.vocabulary import OUTCOMES


def pdf_text(response) -> str:
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response.content.startswith(b"%PDF-")
    reader = PdfReader(io.BytesIO(response.content))
    return "\n".join(page.extract_text() for page in reader.pages)


def test_the_statement_pdf_states_the_closed_year(demo, owner):
    year = ContractYear.objects.get(contract=demo.contract, number=1)
    assert year.state == "closed"
    response = owner.get(f"/contracts/{demo.contract.pk}/years/1/statement.pdf")
    assert "attachment" in response["Content-Disposition"]
    text = pdf_text(response)
    # Lines wrap where the page ends them: phrases are matched on single spaces, the hash on none.
    words = " ".join(text.split())
    flat = re.sub(r"\s+", "", text)

    assert "Annual statement" in words and "Acme AI" in words
    assert "90 % of eligible failures resolved live" in words  # the terms
    assert "15 minutes" in words and "1,200,000.00 USD" in words
    counts = year.counts
    eligible = counts["live_resolved"] + counts["rolled_back"] + counts["failed"]
    row = " ".join(f"{counts[outcome]:,}" for outcome in OUTCOMES) + f" {eligible:,}"
    assert f"live resolved rolled back failed pending excluded planned eligible {row}" in words
    compliance = rules.compliance(counts["live_resolved"], eligible)
    low, high = rules.clopper_pearson(counts["live_resolved"], eligible)
    assert f"{compliance * 100:.2f} %" in words
    assert f"95 % Clopper–Pearson interval {low * 100:.2f} % – {high * 100:.2f} %" in words
    assert "misses" in words
    credit = year.credits.get()
    assert "300,000.00 USD, earned" in words
    assert f"Credit {credit.pk}" in words
    assert f"Incidents ({len(year.evidence['incidents'])})" in words
    first = Incident.objects.filter(pk__in=year.evidence["incident_ids"]).earliest("detected_at")
    assert f"{first.pk} {first.detected_at:%Y-%m-%d %H:%M:%S} {first.trigger}" in words
    assert f"Rules version {rules.RULES_VERSION}" in words
    assert evidence_hash(year.evidence) in flat
