/** The personal-data guardrail set the benchmark measures (CONTRACT §17): masked on the way out, restored on the way back, masked in the answer. */
const personal = ['email', 'phone', 'credit_card', 'iban', 'us_ssn', 'ip_address']

export const personalDataGuardrails = {
  mode: 'enforce',
  input: personal.map((detector) => ({ detector, action: 'mask' })),
  output: personal.map((detector) => ({ detector, action: 'mask' })),
}

/** A realistic prompt of about 1 KB: prose with a few personal values among ordinary numbers. */
export const guardedPrompt =
  'Hi team, following up on ticket 48213 from 2024-03-15. The customer, Jane Doe, wrote from jane.doe@example.com and asked us to call ' +
  'her back at +1 415 555 2671 before 5 pm. She paid invoice INV-2024-0042 for 1,250.00 EUR from her account DE89 3704 0044 0532 0130 00 ' +
  'but the payment shows twice in our ledger (version 2.4.1 of the billing service, build 20240315.2). Our logs show the requests came ' +
  'from 203.0.113.42 and took 1.5 s each. Please check whether the second charge of 1,250.00 EUR can be refunded, draft a short, ' +
  'friendly answer that apologises for the trouble, explains the next steps, says the refund takes 3 to 5 business days and gives ' +
  'our support line. Keep it under 120 words, no bullet points, and sign it as the billing team. Also list anything we should ' +
  'double-check before we send it, such as the amount, the date of the first charge and the reference number on her statement.'
