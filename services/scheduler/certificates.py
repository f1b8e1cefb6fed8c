"""A cluster's own certificate authority and the servers' certificate, made at deploy time.

`pedl-scheduler init --tls-host NAME` uses these so a deployment serves TLS without an operator
running openssl: the CA's certificate is public (copied to agents and clients), its key and the
server key stay on the scheduler's machine. Made with `cryptography` (the library CPython's own
ssl tooling and most Python TLS stacks build on), never by hand-rolled ASN.1.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 3650  # a private CA for one cluster: rotated by re-running init, not by expiry


@dataclass(frozen=True)
class Issued:
    """PEM bytes: the CA's certificate and key, the server's certificate and key."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def subject_alt_name(host: str) -> x509.GeneralName:
    """An IP address entry for an address, a DNS entry for anything else (refused if empty)."""
    if not host.strip():
        raise ValueError("--tls-host must not be empty")
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue(hosts: list[str], cluster: str = "pedl") -> Issued:
    """A new CA and a server certificate it signed, valid for every name or address in `hosts`."""
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{cluster} cluster CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([subject_alt_name(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Issued(
        ca_cert=ca_cert.public_bytes(serialization.Encoding.PEM),
        ca_key=_pem_key(ca_key),
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=_pem_key(key),
    )


def names_in(cert_pem: bytes) -> set[str]:
    """The DNS names and IP addresses a certificate is valid for."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {
        *san.get_values_for_type(x509.DNSName),
        *(str(a) for a in san.get_values_for_type(x509.IPAddress)),
    }
