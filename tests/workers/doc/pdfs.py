"""PDFs the doc tests generate: born-digital invoices (FR, EN), scans, broken files."""

from __future__ import annotations

from fpdf import FPDF
from fpdf.enums import EncryptionMethod

# The demo's sample documents, re-exported for the tests (one generator for both).
from workers.doc.demo import scanned_pdf, text_pdf

__all__ = ["scanned_pdf", "text_pdf"]

INVOICE_FR = """ACME Conseil SARL
12 rue de la Paix, 75002 Paris
N° TVA intracommunautaire : FR40 303 265 045
FACTURE N° FAC-2024-0042
Date de facture : 12/03/2024
Date d'échéance : 11 avril 2024
Client : Dupont et Fils
Audit de sécurité des serveurs : 1 200,00 €
Total HT : 1 200,00 €
TVA 20 % : 240,00 €
Total TTC : 1 440,00 €
Règlement par virement - IBAN : FR76 3000 6000 0112 3456 7890 189"""

CONDITIONS_FR = """Conditions générales de vente
Le paiement est dû à trente jours. En cas de retard, des pénalités sont exigibles
ainsi qu'une indemnité forfaitaire pour frais de recouvrement de quarante euros."""

INVOICE_EN = """Northwind Trading Ltd
Invoice Number: INV-7731
Invoice Date: March 5, 2024
Due Date: 04/04/2024
Bill To: Contoso LLC
Consulting services for the warehouse migration
Subtotal: $2,500.00
VAT (20%): $500.00
Total Due: $3,000.00
VAT Reg No: GB123456789
Please pay by bank transfer to IBAN GB82 WEST 1234 5698 7654 32"""

SCAN_FR = """FACTURE N° SCAN-2024-7
Date : 05/02/2024
Total TTC : 360,00 EUR"""


def encrypted_pdf() -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.cell(text="Confidential")
    pdf.set_encryption(
        owner_password="owner", user_password="secret", encryption_method=EncryptionMethod.RC4
    )
    return bytes(pdf.output())


def corrupt_pdf() -> bytes:
    """A PDF header followed by bytes that are no PDF structure."""
    return b"%PDF-1.7\n" + bytes(range(256)) * 40


NOT_A_PDF = b"PK\x03\x04 this is a zip archive, not a PDF" + b"\x00" * 64
