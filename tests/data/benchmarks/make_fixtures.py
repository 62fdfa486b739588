"""Writes the small benchmark fixtures of this folder, each in its benchmark's public format
(columns, types and file format of the public release; the questions are written for the tests).

    python tests/data/benchmarks/make_fixtures.py
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent


def jsonl(name: str, rows: list[dict]) -> None:
    with (HERE / name).open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def parquet(name: str, rows: list[dict]) -> None:
    pq.write_table(pa.Table.from_pylist(rows), HERE / name)


def main() -> None:
    # openai/gsm8k (main/test): question, answer with the reasoning and "#### N"
    parquet(
        "gsm8k_main_test.parquet",
        [
            {
                "question": "A shop sells 1,200 pens a week. How many pens does it sell in 3 weeks?",
                "answer": "It sells 1200 * 3 = <<1200*3=3600>>3600 pens.\n#### 3,600",
            },
            {"question": "Tom has 5 apples and eats 2. How many are left?", "answer": "5 - 2 = <<5-2=3>>3\n#### 3"},
            {
                "question": "A bus carries 40 people on each of 6 trips. How many people in all?",
                "answer": "40 * 6 = <<40*6=240>>240\n#### 240",
            },
        ],
    )
    # Hothan/OlympiadBench (OE_TO_maths_en_COMP): final_answer is a list of LaTeX strings
    base = {
        "solution": ["..."],
        "image_1": None,
        "modality": "Text-only",
        "difficulty": "Competition",
        "unit": None,
        "error": None,
        "question_type": "Open-ended",
        "subject": "Math",
        "language": "English",
    }
    parquet(
        "olympiadbench_oe_to_maths_en_comp.parquet",
        [
            {
                **base,
                "id": 2001,
                "question": "Compute the number of positive divisors of 360.",
                "final_answer": ["$24$"],
                "context": None,
                "is_multiple_answer": False,
                "answer_type": "Numerical",
                "subfield": "Number Theory",
            },
            {
                **base,
                "id": 2002,
                "question": "Find all real $x$ with $x^2 = 9$.",
                "final_answer": ["$-3$, $3$"],
                "context": None,
                "is_multiple_answer": True,
                "answer_type": "Numerical",
                "subfield": "Algebra",
            },
            {
                **base,
                "id": 2003,
                "question": "Find $a_5$.",
                "final_answer": ["$\\frac{1}{32}$"],
                "context": "Let $a_1 = 1/2$ and $a_{n+1} = a_n / 2$.",
                "is_multiple_answer": False,
                "answer_type": "Numerical",
                "subfield": "Algebra",
            },
        ],
    )
    # Qwen2.5-Math's minerva_math/test.jsonl: the answer is the last \boxed of the solution
    jsonl(
        "minerva_math.jsonl",
        [
            {
                "problem": "A car travels 150 km in 2.5 hours. What is its average speed in km/h?",
                "solution": "Speed is distance over time: $150/2.5 = \\boxed{60}$.",
                "type": "Physics",
                "idx": 0,
            },
            {"problem": "Compute $2^{10}$.", "solution": "$2^{10} = \\boxed{1024}$.", "type": "Math", "idx": 1},
        ],
    )
    # math-ai/minervamath: question, answer
    jsonl("minervamath_hf.jsonl", [{"question": "Compute $3^4$.", "answer": "81"}])
    # AI-MO/aimo-validation-amc: id, problem, answer (a float), url
    parquet(
        "amc_aimo_validation.parquet",
        [
            {"id": 0, "problem": "What is $1+2+\\cdots+10$?", "answer": 55.0, "url": "https://example.org/amc/0"},
            {"id": 1, "problem": "What is $7 \\cdot 8$?", "answer": 56.0, "url": "https://example.org/amc/1"},
        ],
    )
    # math-ai/amc23: id, question, answer
    jsonl(
        "amc23.jsonl",
        [{"id": 0, "question": "What is $12 - 5$?", "answer": "7.0", "url": "https://example.org/amc23/0"}],
    )
    # TIGER-Lab/MMLU-Pro (test): up to 10 options, answer letter and index
    parquet(
        "mmlu_pro_test.parquet",
        [
            {
                "question_id": 70,
                "question": "Which gas makes up most of Earth's atmosphere?",
                "options": [
                    "Oxygen",
                    "Carbon dioxide",
                    "Argon",
                    "Nitrogen",
                    "Helium",
                    "Neon",
                    "Hydrogen",
                    "Ozone",
                    "Methane",
                    "Xenon",
                ],
                "answer": "D",
                "answer_index": 3,
                "cot_content": "",
                "category": "physics",
                "src": "fixture",
            },
            {
                "question_id": 71,
                "question": "What is 6 times 7?",
                "options": ["36", "42", "48", "54", "56", "63", "64", "49", "35", "40"],
                "answer": "B",
                "answer_index": 1,
                "cot_content": "",
                "category": "math",
                "src": "fixture",
            },
            {
                "question_id": 72,
                "question": "Which is a prime number?",
                "options": ["21", "27", "29", "33"],
                "answer": "C",
                "answer_index": 2,
                "cot_content": "",
                "category": "math",
                "src": "fixture",
            },
        ],
    )
    # m-a-p/SuperGPQA (SuperGPQA-all.jsonl): answer is the option text, answer_letter its letter
    jsonl(
        "supergpqa.jsonl",
        [
            {
                "uuid": "a1",
                "question": "What is the SI unit of force?",
                "options": ["Joule", "Newton", "Watt", "Pascal"],
                "answer": "Newton",
                "answer_letter": "B",
                "discipline": "Science",
                "field": "Physics",
                "subfield": "Mechanics",
                "difficulty": "easy",
                "is_calculation": False,
            },
            {
                "uuid": "a2",
                "question": "How many sides has a hexagon?",
                "options": ["5", "6", "7", "8", "9"],
                "answer": "6",
                "answer_letter": "B",
                "discipline": "Science",
                "field": "Mathematics",
                "subfield": "Geometry",
                "difficulty": "easy",
                "is_calculation": False,
            },
        ],
    )
    # Idavidrein/gpqa (gpqa_diamond.csv): one correct and three incorrect answers per question
    header = [
        "Pre-Revision Question",
        "Question",
        "Correct Answer",
        "Incorrect Answer 1",
        "Incorrect Answer 2",
        "Incorrect Answer 3",
        "Explanation",
        "Record ID",
        "High-level domain",
        "Subdomain",
    ]
    rows = [
        [
            "",
            "What is the charge of an electron in units of e?",
            "-1",
            "+1",
            "0",
            "-2",
            "",
            "rec1",
            "Physics",
            "Particle",
        ],
        [
            "",
            "Which base pairs with adenine in DNA?",
            "Thymine",
            "Cytosine",
            "Guanine",
            "Uracil",
            "",
            "rec2",
            "Biology",
            "Genetics",
        ],
        ["", "What is the pH of pure water at 25 C?", "7", "1", "14", "0", "", "rec3", "Chemistry", "Acids"],
    ]
    with (HERE / "gpqa_diamond.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    # BBEH on the hub: input, target, task
    jsonl(
        "bbeh.jsonl",
        [
            {"input": "Compute ((3 + 4) * 2).", "target": "14", "task": "multistep arithmetic"},
            {
                "input": "Is the statement 'not (True and False)' true or false?",
                "target": "True",
                "task": "boolean expressions",
            },
            {
                "input": "Which option is the odd one out? (a) cat (b) dog (c) car",
                "target": "(c)",
                "task": "disambiguation qa",
            },
        ],
    )
    # google-deepmind/bbeh: benchmark_tasks/<task>/task.json
    (HERE / "bbeh_task.json").write_text(
        json.dumps(
            {
                "canary": "fixture",
                "examples": [{"input": "Sort the words: pear apple", "target": "apple pear"}],
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    # a validation file as the paper's: MATH training questions and MMLU validation questions (cais/mmlu)
    jsonl(
        "validation_mixed.jsonl",
        [
            {"problem": "What is $2+3$?", "answer": "5", "level": "Level 3", "type": "Algebra"},
            {"problem": "Simplify $\\frac{6}{8}$.", "answer": "\\frac{3}{4}", "level": "Level 3", "type": "Prealgebra"},
            {
                "question": "Which planet is closest to the Sun?",
                "subject": "astronomy",
                "choices": ["Venus", "Mercury", "Earth", "Mars"],
                "answer": 1,
            },
            {
                "question": "Water boils at sea level at which temperature in Celsius?",
                "subject": "physics",
                "choices": ["90", "100", "110", "120"],
                "answer": 1,
            },
        ],
    )


if __name__ == "__main__":
    main()
