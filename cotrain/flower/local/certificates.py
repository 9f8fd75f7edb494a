"""Throw-away TLS certificates and SuperNode authentication keys for a local deployment.

:func:`write_tls_certificates` writes a certificate authority and a server certificate for
``127.0.0.1``/``localhost`` signed by it (what ``flower-superlink --ssl-*`` takes);
:func:`write_node_key` writes the ECDSA key pair a SuperNode authenticates with (what
``ssh-keygen -t ecdsa -b 384`` writes). Both use the ``cryptography`` package that Flower
depends on; it is imported only inside them.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
from pathlib import Path
from typing import Any

__all__ = ["write_node_key", "write_tls_certificates"]


def _certificate(
    subject: Any,
    issuer: Any,
    public_key: Any,
    signer: Any,
    extensions: list[tuple[Any, bool]],
    valid_from: _dt.datetime,
) -> Any:
    """A certificate for ``subject``, valid for a week from ``valid_from``, signed by ``signer``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid_from)
        .not_valid_after(valid_from + _dt.timedelta(days=7))
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signer, hashes.SHA256())


def write_tls_certificates(directory: str | Path) -> tuple[Path, Path, Path]:
    """Write a CA and a server certificate for ``127.0.0.1``/``localhost`` into ``directory``.

    Keys are ECDSA P-256; the certificates are valid for a week. The files are
    ``ca.pem`` (the CA certificate clients trust), ``server.pem`` and ``server.key``
    (PKCS #8, unencrypted, mode ``0600``). The CA's private key is not kept.

    Parameters
    ----------
    directory : str or Path
        An existing directory; files there with these names are overwritten.

    Returns
    -------
    tuple of Path
        ``(ca.pem, server.pem, server.key)``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as certs:  # doctest: +SKIP
    ...     print([p.name for p in write_tls_certificates(certs)])
    ['ca.pem', 'server.pem', 'server.key']
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    certs = Path(directory)
    now = _dt.datetime.now(_dt.UTC) - _dt.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cotrain local CA")])
    ca_usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    ca_cert = _certificate(
        ca_name,
        ca_name,
        ca_key.public_key(),
        ca_key,
        [
            (x509.BasicConstraints(ca=True, path_length=0), True),
            (ca_usage, True),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False),
        ],
        now,
    )

    key = ec.generate_private_key(ec.SECP256R1())
    localhost = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = _certificate(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]),
        ca_name,
        key.public_key(),
        ca_key,
        [
            (x509.SubjectAlternativeName(localhost), False),
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
            (x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False),
        ],
        now,
    )

    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = certs / "ca.pem", certs / "server.pem", certs / "server.key"
    ca_file.write_bytes(ca_cert.public_bytes(pem))
    cert_file.write_bytes(cert.public_bytes(pem))
    key_file.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_file.chmod(0o600)
    return ca_file, cert_file, key_file


def write_node_key(path: str | Path) -> Path:
    """Write an ECDSA P-384 key pair in OpenSSH format (like ``ssh-keygen -t ecdsa -b 384``).

    The private key goes to ``path`` (unencrypted, mode ``0600``), the public key to
    ``path`` with the suffix ``.pub`` (what ``flwr supernode register`` takes).

    Parameters
    ----------
    path : str or Path
        The private key file, in an existing directory; overwritten.

    Returns
    -------
    Path
        The public key file.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as keys:  # doctest: +SKIP
    ...     public = write_node_key(Path(keys) / "supernode-0")
    ...     print(public.name, public.read_text().split()[0])
    supernode-0.pub ecdsa-sha2-nistp384
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP384R1())
    path = Path(path)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    public_file = path.with_suffix(".pub")
    public_file.write_bytes(public + b"\n")
    return public_file
